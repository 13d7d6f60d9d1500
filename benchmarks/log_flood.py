"""How many log lines a reset loop makes the daemon write.

    sudo .venv/bin/python benchmarks/log_flood.py [--seconds 20]

Mounts one ipu2 (`ipufs mount`, as benchmarks/run.py does), then a client
attaches, resets and closes (detaches) ipu0 in a loop for the given time;
prints the loop's rounds and the lines the daemon's log gained meanwhile
(docs/reliability.md quotes them).
"""
from __future__ import annotations

import argparse
import time

from run import daemon, on_client_cpu

from ipufs.client import Device


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    on_client_cpu()
    with daemon(1) as (mnt, _, _):
        log = mnt.parent / "daemon.log"
        before = len(log.read_text().splitlines())
        rounds, end = 0, time.monotonic() + args.seconds
        while time.monotonic() < end:
            with Device(0, mnt) as dev:
                dev.attach()
                dev.reset()
            rounds += 1
        time.sleep(0.5)
        lines = log.read_text().splitlines()[before:]
    print(f"{rounds:,} rounds of attach, reset, detach in {args.seconds:g} s: {len(lines):,} log lines, "
          f"{sum('suppressed' in line for line in lines)} of them summaries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
