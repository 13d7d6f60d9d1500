"""FUSE over io_uring against /dev/fuse and the C libfuse3 server, measured
side by side in alternating rounds.

    sudo flock /tmp/ipufs-heavy.lock .venv/bin/python benchmarks/transports.py

Every round starts each server afresh and measures it in turn: the C
libfuse3 server (benchmarks/fuse_baseline.c, one thread), ipufs over
/dev/fuse (`--uring off`) and ipufs over io_uring (`--uring on`: the fuse
module's enable_uring is set to Y while it mounts and restored at once),
each ipufs with its fast path and without (`--no-fast-path`). For each:

- the ioctl round trip (SET_IPU_ID, which Python answers), p50, with the
  client pinned to CPU 0 and the server to CPU 1 as benchmarks/run.py pins
  them (a ring thread runs on its own CPU whatever the server's pinning);
- the sustained rate of MAILBOX_READ_ONLY (the fast path answers it), with
  1, 2 and 8 clients left unpinned, so that they run on both CPUs and
  io_uring gets requests on both CPUs' queues.

Ratios are to the C server, per round, then the median over the rounds.

With `--unpinned-server` every server is left to the scheduler instead (as
benchmarks/request_path.py runs them): the Python reader of an ipufs over
io_uring is then woken on the CPU of the ring thread that woke it, which
is the client's.

`--against CHECKOUT` adds each ipufs server of another checkout (its own
.venv: `git worktree add ../old REV && (cd ../old && ./dev setup)`),
measured in the same rounds, for a before-and-after in the same hour;
`--only WORD` keeps the servers whose name contains WORD (repeatable; the
C server always stays, as every ratio's base).
"""
from __future__ import annotations

import argparse
import fcntl
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (the benchmark's own helpers: pinning, the client, the servers)

ENABLE = Path("/sys/module/fuse/parameters/enable_uring")
#: Held while ENABLE is changed (tests/integration/harness.py holds it too).
LOCK = "/tmp/ipufs-enable-uring.lock"
CLIENTS = (1, 2, 8)
#: name -> ipufs mount options (None: the C server).
SERVERS: dict[str, tuple[str, ...] | None] = {
    "C libfuse3, 1 thread": None,
    "ipufs /dev/fuse": ("--uring", "off"),
    "ipufs /dev/fuse, no fast path": ("--uring", "off", "--no-fast-path"),
    "ipufs io_uring": ("--uring", "on"),
    "ipufs io_uring, no fast path": ("--uring", "on", "--no-fast-path"),
}


@contextmanager
def server(options: tuple[str, ...] | None, baseline: Path, cpu: int | None = run.SERVER_CPU,
           checkout: Path = run.ROOT) -> Iterator[Path]:
    """A mount of the C server or of ipufs (of ``checkout``) with
    ``options``, pinned to ``cpu`` (None: left to the scheduler)."""
    if options is None:
        with run.fuse_server([str(baseline)], cpu) as (mnt, _):
            yield mnt
        return
    with ExitStack() as mounted:
        with ExitStack() as parameter:
            if "on" in options:  # Y only while it mounts: the kernel asks at INIT
                lock = parameter.enter_context(open(LOCK, "a"))
                fcntl.flock(lock, fcntl.LOCK_EX)
                parameter.callback(ENABLE.write_text, ENABLE.read_text().strip())
                ENABLE.write_text("Y")
            mnt = mounted.enter_context(run.daemon(1, "ipu2", checkout, extra=options, cpu=cpu))[0]
        transport = os.getxattr(mnt, "user.ipufs.transport").decode()
        assert ("io_uring" in transport) == ("on" in options), transport
        yield mnt


def rate(binary: Path, mnt: Path, clients: int, seconds: float) -> float:
    """MAILBOX_READ_ONLY per second over ``clients`` unpinned processes."""
    procs = [subprocess.Popen([str(binary), "ioctl-rate", str(mnt), "0", str(seconds)], stdout=subprocess.PIPE,
                              text=True) for _ in range(clients)]
    return sum(int(p.communicate()[0]) for p in procs) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="per rate")
    parser.add_argument("-n", type=int, default=4000, help="round trips per round")
    parser.add_argument("--unpinned-server", action="store_true", help="leave every server to the scheduler")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT", help="also measure this checkout's ipufs")
    parser.add_argument("--only", action="append", metavar="WORD", help="only the servers whose name has WORD")
    args = parser.parse_args()
    servers: dict[str, tuple[tuple[str, ...] | None, Path]] = {}
    for name, options in SERVERS.items():
        if options is None or not args.only or any(word in name for word in args.only):
            servers[name] = options, run.ROOT
            if options is not None and args.against is not None:
                servers[f"{name} ({args.against.resolve().name})"] = options, args.against.resolve()
    binary = run.build()
    baseline = run.build_baseline()
    if baseline is None:
        sys.exit("the C server needs libfuse3-dev")
    load = os.getloadavg()[0]
    rtt: dict[str, list[float]] = {name: [] for name in servers}
    rates: dict[tuple[str, int], list[float]] = {(name, c): [] for name in servers for c in CLIENTS}
    for _ in range(args.rounds):
        for name, (options, checkout) in servers.items():
            with server(options, baseline, None if args.unpinned_server else run.SERVER_CPU, checkout) as mnt:
                run.run_client(binary, "ioctl", mnt, 0, args.n // 4)  # warm up
                rtt[name].append(run.p50(run.run_client(binary, "ioctl", mnt, 0, args.n)) / 1000)
                for clients in CLIENTS:
                    rates[name, clients].append(rate(binary, mnt, clients, args.seconds))
    c_name = next(iter(servers))

    def cell(values: list[float], base: list[float], fmt: str) -> str:
        ratios = [a / b for a, b in zip(values, base, strict=True)]
        spread = f", {min(ratios):.2f}–{max(ratios):.2f}" if len(ratios) > 1 else ""
        return f"{format(statistics.median(values), fmt)} ({statistics.median(ratios):.2f}×{spread})"

    placement = "unpinned" if args.unpinned_server else "on CPU 1"
    print(f"{args.rounds} rounds; {run.machine()}; servers {placement}; "
          f"1-minute load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    print("| server | round trip p50, µs | " + " | ".join(f"ioctls/s, {c} client{'s' * (c > 1)}" for c in CLIENTS)
          + " |")
    print("|---|---|" + "---|" * len(CLIENTS))
    for name in servers:
        print(f"| {name} | {cell(rtt[name], rtt[c_name], '.1f')} | "
              + " | ".join(cell(rates[name, c], rates[c_name, c], ',.0f') for c in CLIENTS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
