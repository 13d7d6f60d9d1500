"""What Prometheus scrapes of `ipufs exporter` cost, by IPU count.

    sudo .venv/bin/python benchmarks/scrape.py              # 4 and 16 ipu2 IPUs
    sudo .venv/bin/python benchmarks/scrape.py --smoke      # seconds: checks it works

Two figures per IPU count. A reading: the wall time of one scrape that
reads every IPU (the exporter started with --cache 0), p50 and p99 of 50;
a Prometheus scrape_timeout must exceed it. A crowd: sixteen scrapers
scraping back to back for 10 s against the exporter as it is shipped (its
1 s cache), and the share of a CPU the daemon spent meanwhile, which is
what the IPUs' own work loses to monitoring. `--old` measures an exporter
from before --cache (it read the IPUs at every scrape). docs/monitoring.md
quotes the figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.harness import daemon_process, ipufs_command, stop_processes  # noqa: E402


@contextmanager
def mounted(ipus: int, options: list[str]) -> Iterator[tuple[int, str]]:
    """(the daemon's pid, the exporter's /metrics URL)."""
    with tempfile.TemporaryDirectory(prefix="ipufs-scrape-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        daemon = daemon_process(mnt, "--ipus", str(ipus), "--profile", "ipu2", "--no-link-dev")
        exporter = subprocess.Popen(ipufs_command("exporter", "--dev", str(mnt), "--listen", "127.0.0.1:0", *options),
                                    stdout=subprocess.PIPE, text=True)
        try:
            assert exporter.stdout is not None
            url = exporter.stdout.readline().split()[-1]
            with urllib.request.urlopen(url, timeout=30) as r:  # the first pays for imports
                r.read()
            yield daemon.pid, url
        finally:
            exporter.terminate()
            exporter.wait(10)
            stop_processes(mnt, daemon)


def _get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()


def reading(ipus: int, scrapes: int, options: list[str]) -> tuple[float, float]:
    """(p50, p99) of one scrape's wall time in ms."""
    with mounted(ipus, options) as (_, url):
        times = []
        for _ in range(scrapes):
            began = time.perf_counter()
            _get(url)
            times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=100)[98] if len(times) > 1 else times[0]


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def crowd(ipus: int, scrapers: int, seconds: float, options: list[str]) -> tuple[float, int]:
    """(the daemon's CPU share in %, scrapes answered) while ``scrapers``
    scrape back to back for ``seconds``."""
    with mounted(ipus, options) as (pid, url):
        done = [0] * scrapers
        stop = time.monotonic() + seconds

        def scraper(i: int) -> None:
            while time.monotonic() < stop:
                _get(url)
                done[i] += 1

        threads = [threading.Thread(target=scraper, args=(i,)) for i in range(scrapers)]
        cpu, began = _cpu(pid), time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        share = (_cpu(pid) - cpu) / (time.monotonic() - began) * 100
    return share, sum(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few scrapes of 2 IPUs")
    parser.add_argument("--old", action="store_true", help="the exporter has no --cache option")
    args = parser.parse_args()
    fresh = [] if args.old else ["--cache", "0"]
    for ipus, scrapes, seconds in ([(2, 3, 1.0)] if args.smoke else [(4, 50, 10.0), (16, 50, 10.0)]):
        p50, p99 = reading(ipus, scrapes, fresh)
        print(f"scrape of {ipus} × ipu2: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({scrapes} scrapes)")
        share, answered = crowd(ipus, 16, seconds, [])
        print(f"16 scrapers for {seconds:g} s on {ipus} × ipu2: daemon CPU {share:.0f} %, {answered} scrapes answered")


if __name__ == "__main__":
    main()
