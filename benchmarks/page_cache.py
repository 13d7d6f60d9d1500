"""What page-cache mode costs against passthrough: the mode an unprivileged
`ipufs run` (or `--no-passthrough`) serves BARs in, where the model's
writes are pushed with FUSE_NOTIFY_STORE before a reply and clients'
stores are fetched with FUSE_NOTIFY_RETRIEVE (docs/filesystem.md).

    sudo .venv/bin/python benchmarks/page_cache.py [--smoke]

Prints a Markdown table (docs/performance.md, "Page-cache mode"). Each
figure is taken from one daemon per mode, in the same run.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import build, daemon, p50, p99, run_client, us  # noqa: E402  (a sibling script, not a package)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(mnt: Path, pid: int, seconds: float) -> float:
    """The daemon's CPU share while a client holds ipu0 open and does
    nothing (in page-cache mode the register watcher retrieves its pages
    every 10 ms then)."""
    fd = os.open(mnt / "ipu0", os.O_RDWR)
    try:
        time.sleep(1.5)  # past the watcher's busy second after the open
        before = cpu_seconds(pid)
        time.sleep(seconds)
        return (cpu_seconds(pid) - before) / seconds
    finally:
        os.close(fd)


def busy_cpu(mnt: Path, pid: int, seconds: float) -> float:
    """The daemon's CPU share while a client holds ipu0 open and makes one
    request every 100 ms, so that the IPU stays busy (active within the
    last second: the watcher then looks every 100 µs, retrieving its pages
    in page-cache mode)."""
    fd = os.open(mnt / "ipu0", os.O_RDWR)
    try:
        before = cpu_seconds(pid)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.pread(fd, 4, 0)
            time.sleep(0.1)
        return (cpu_seconds(pid) - before) / seconds
    finally:
        os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few repetitions: checks the script works")
    args = parser.parse_args()
    binary = build()
    n = 50 if args.smoke else 2000
    figures: dict[str, dict[str, str]] = {}
    for mode, extra in (("passthrough", ()), ("page-cache", ("--no-passthrough",))):
        with daemon(2, extra=extra) as (mnt, pid, _):
            got = os.getxattr(mnt, "user.ipufs.mode").decode()
            if got != mode:
                raise SystemExit(f"asked for {mode}, the mount serves {got}")
            rtt = run_client(binary, "ioctl", mnt, 0, n * 5)
            row = {"ioctl round trip (SET_IPU_ID, ipu0 open), p50 / p99": f"{us(p50(rtt))} / {us(p99(rtt))}"}
            for client_mode, label in (("doorbell-pwrite", "pwrite CMD_SYNC → signal 46"),
                                       ("doorbell-mapped", "mapped store CMD_SYNC → signal 46")):
                lat = run_client(binary, client_mode, mnt, 1, n)
                row[f"{label}, p50 / p99"] = f"{us(p50(lat))} / {us(p99(lat))}"
            share = idle_cpu(mnt, pid, 1.0 if args.smoke else 5.0)
            row["daemon CPU while a client holds ipu0 open, idle"] = f"{share * 100:.1f} %"
            share = busy_cpu(mnt, pid, 1.0 if args.smoke else 5.0)
            row["daemon CPU while a client holds ipu0 open, one pread every 100 ms"] = f"{share * 100:.1f} %"
            figures[mode] = row
    print("| figure | passthrough | page-cache |")
    print("|---|---|---|")
    for name in figures["passthrough"]:
        print(f"| {name} | {figures['passthrough'][name]} | {figures['page-cache'][name]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
