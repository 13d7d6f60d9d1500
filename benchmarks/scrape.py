"""How long one Prometheus scrape of `ipufs exporter` takes, by IPU count.

    sudo .venv/bin/python benchmarks/scrape.py              # 4 and 16 ipu2 IPUs, 50 scrapes each
    sudo .venv/bin/python benchmarks/scrape.py --smoke      # seconds: checks it works

Each scrape reads every IPU as `ipufs info` does (a pread of its registers,
four ICU transfers, a control request), so its cost grows with the IPUs;
a Prometheus scrape_timeout must exceed it. docs/monitoring.md quotes it.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.harness import daemon_process, ipufs_command, stop_processes  # noqa: E402


def measure(ipus: int, scrapes: int) -> tuple[float, float]:
    """(p50, p99) of one scrape's wall time in ms."""
    with tempfile.TemporaryDirectory(prefix="ipufs-scrape-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        daemon = daemon_process(mnt, "--ipus", str(ipus), "--profile", "ipu2", "--no-link-dev")
        exporter = subprocess.Popen(ipufs_command("exporter", "--dev", str(mnt), "--listen", "127.0.0.1:0"),
                                    stdout=subprocess.PIPE, text=True)
        try:
            assert exporter.stdout is not None
            url = exporter.stdout.readline().split()[-1]
            times = []
            for _ in range(scrapes + 1):
                began = time.perf_counter()
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                times.append((time.perf_counter() - began) * 1000)
            times = times[1:]  # the first pays for imports
            return statistics.median(times), statistics.quantiles(times, n=100)[98] if len(times) > 1 else times[0]
        finally:
            exporter.terminate()
            exporter.wait(10)
            stop_processes(mnt, daemon)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few scrapes of 2 IPUs")
    args = parser.parse_args()
    for ipus, scrapes in ([(2, 3)] if args.smoke else [(4, 50), (16, 50)]):
        p50, p99 = measure(ipus, scrapes)
        print(f"scrape of {ipus} × ipu2: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({scrapes} scrapes)")


if __name__ == "__main__":
    main()
