"""pwrite throughput of a client while 64 live traces are never read.

    sudo .venv/bin/python benchmarks/stalled_traces.py [--seconds 30]

Mounts one ipu2 (`ipufs mount`, as benchmarks/run.py does), measures a
client's register pwrite rate for 5 s with no trace, then opens 64 control
connections that ask for a live trace and never read, and measures the
rate second by second. The daemon closes a trace that is not read within
its line deadline (10 s, docs/control.md), after which the rate should be
back to the first figure. Prints one line per phase; docs/reliability.md
quotes them.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import time

from run import daemon, on_client_cpu

from ipufs.abi.registers import REGISTERS
from ipufs.client import Device
from ipufs.client.control import control_path

TRACES = 64


def rates(mnt: os.PathLike[str], seconds: int) -> list[float]:
    """pwrites per second of SCRATCH on ipu0, one figure per second."""
    out = []
    with Device(0, mnt) as dev:
        value, offset = struct.pack("<I", 1), REGISTERS["SCRATCH"].offset
        for _ in range(seconds):
            n, end = 0, time.monotonic() + 1
            while time.monotonic() < end:
                os.pwrite(dev.fd, value, offset)
                n += 1
            out.append(float(n))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=30)
    args = parser.parse_args()
    on_client_cpu()
    with daemon(1) as (mnt, _, _):
        quiet = rates(mnt, 5)
        held = []
        try:
            for _ in range(TRACES):
                s = socket.socket(socket.AF_UNIX)
                s.connect(control_path(mnt))
                s.sendall(b'{"op": "trace"}\n')
                held.append(s)  # never read
            stalled = rates(mnt, args.seconds)
        finally:
            for s in held:
                s.close()
    print(f"no trace: {statistics.median(quiet):,.0f} pwrite/s (median of 5 s)")
    print(f"{TRACES} traces never read, seconds 1-5: {statistics.median(stalled[:5]):,.0f} pwrite/s")
    print(f"{TRACES} traces never read, seconds 16-{args.seconds}: "
          f"{statistics.median(stalled[15:]):,.0f} pwrite/s")
    print("per second:", " ".join(f"{r:.0f}" for r in stalled))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
