"""The request path: ipufs's ways of serving a request, each against the C
libfuse server with one thread and with cloned threads, side by side.

    sudo .venv/bin/python benchmarks/request_path.py [--smoke]   # just these rows

benchmarks/run.py takes the same rows into docs/performance.md. In every
round each server is started, warmed up, measured and stopped in turn (the
order rotating from round to round, so that none always follows the same
neighbour): the ipufs variants of VARIANTS (a real `ipufs mount`, 4 × ipu2),
benchmarks/fuse_baseline.c in its two forms, and benchmarks/python_floor.py.
One server runs at a time and none is pinned: the multi-threaded forms exist
to use every CPU. Each figure's ratio is the median of the rounds' ratios.

Per server and round:
- the round trip of the hot ioctl, MAILBOX_READ_ONLY's count form (which
  the fast path answers natively), with the client pinned to CPU 0, then
  with the client left to the scheduler; and of SET_IPU_ID (which Python
  serves on every path), client pinned;
- the sustained rate (MAILBOX_READ_ONLY) with 1, 2, 8 and 64 client
  processes, placed by the scheduler;
- during each rate run, the server's CPU time (cpu_ns: every thread's time
  on a CPU, as schedstat counts it) over the ioctls the clients made;
- then, for the servers that serve on one thread (classic, fast path, C
  with one thread), the sustained rate with 1 and 8 clients placed as IPC
  benchmarks place them: every thread of the server moved to CPU 1
  (SERVER_CPU) and the clients pinned to CPU 0 (CLIENT_CPU); one client's
  round trip is one over its rate.
"""
from __future__ import annotations

import fcntl
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import run  # noqa: E402  (a sibling script, not a package)

#: Where the kernel says whether FUSE over io_uring may be used; only root
#: may change it.
URING_PARAMETER = Path("/sys/module/fuse/parameters/enable_uring")
#: held while the parameter is changed, by the tests' fixture too
#: (tests/integration/harness.py), so that neither restores the other's value
URING_LOCK = "/tmp/ipufs-enable-uring.lock"
#: Client processes of the sustained-rate rows.
CLIENTS = (1, 2, 8, 64)
#: The client counts whose runs give the CPU-per-request rows.
CPU_CLIENTS = (1, 8)
#: The client counts of the rates with client and server pinned apart.
PINNED_CLIENTS = (1, 8)


class Unavailable(Exception):
    """A variant this checkout or this machine cannot run; the message says why."""


@contextmanager
def nothing_to_set() -> Iterator[None]:
    yield


@contextmanager
def uring_enabled() -> Iterator[None]:
    """enable_uring set to Y while the variant's daemon runs, and back to
    what it was afterwards, on every path (the kernel checks it on every
    ring command, so it must stay Y until the daemon has gone)."""
    if not URING_PARAMETER.exists():
        raise Unavailable(f"this kernel has no FUSE over io_uring (no {URING_PARAMETER})")
    with open(URING_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with _uring_set():
            yield


@contextmanager
def _uring_set() -> Iterator[None]:
    before = URING_PARAMETER.read_text().strip()
    try:
        URING_PARAMETER.write_text("Y")
    except OSError as exc:
        raise Unavailable(f"cannot set {URING_PARAMETER} to Y: {exc.strerror}") from None
    try:
        yield
    finally:
        now = URING_PARAMETER.read_text().strip()
        URING_PARAMETER.write_text(before)
        if now != "Y":  # the parameter is the machine's: another program may set it too
            raise Unavailable(f"{URING_PARAMETER}, set to Y for this variant, was {now} again before its "
                              "daemon ended: another program changed it meanwhile")


@dataclass(frozen=True)
class Option:
    """An `ipufs mount` option and its value, if any. Not ``needed``: it
    only turns a path off, so an ipufs whose mount lacks it has no such
    path to turn off, and runs without it."""

    words: tuple[str, ...]
    needed: bool = True


@dataclass(frozen=True)
class Variant:
    """One way ipufs serves requests: the `ipufs mount` options that choose
    it, the options whose presence shows that the path exists at all, what
    the mount root's attributes must begin with while it serves (an
    attribute this ipufs does not have is not checked), what the machine
    needs while it runs, and whether one thread serves (then it is also
    measured pinned to the servers' CPU)."""

    name: str
    options: tuple[Option, ...]
    requires: tuple[str, ...] = ()
    serves: tuple[tuple[str, str], ...] = ()
    setup: Callable[[], AbstractContextManager[None]] = nothing_to_set
    one_thread: bool = True

    def label(self, options: tuple[str, ...] | None = None) -> str:
        """Its name and the options it is run with (default: all of its own)."""
        if options is None:
            options = tuple(word for option in self.options for word in option.words)
        return f"{self.name} (`{' '.join(options)}`)" if options else f"{self.name} (no options)"


FAST_PATH, TRANSPORT = "user.ipufs.fast_path", "user.ipufs.transport"  # docs/filesystem.md
#: The variants measured: one row each in every figure.
VARIANTS = (
    Variant("classic", (Option(("--no-fast-path",), needed=False), Option(("--uring", "off"), needed=False)),
            serves=((FAST_PATH, "off"), (TRANSPORT, "/dev/fuse"))),
    Variant("fast path", (Option(("--uring", "off"), needed=False),), requires=("--no-fast-path",),
            serves=((FAST_PATH, "on"), (TRANSPORT, "/dev/fuse"))),
    # a ring and a thread per CPU, each thread pinned to its ring's CPU
    Variant("io_uring", (Option(("--uring", "on")),), serves=((FAST_PATH, "on"), (TRANSPORT, "FUSE over io_uring")),
            setup=uring_enabled, one_thread=False),
)


def check_serving(variant: Variant, mnt: Path) -> None:
    """Unavailable unless the mount says it serves as ``variant`` should
    (a fast path held, say, because something needs Python)."""
    for name, prefix in variant.serves:
        try:
            value = os.getxattr(mnt, name).decode()
        except OSError:
            continue  # an ipufs without the attribute
        if not value.startswith(prefix):
            raise Unavailable(f"the mount says {name}={value!r}")


def mount_options(variant: Variant, mount_help: str) -> tuple[str, ...]:
    """The `ipufs mount` options that run ``variant``, given the text of
    `ipufs mount --help`; Unavailable if it lacks one the variant needs."""
    offered = set(re.findall(r"--[a-z][a-z0-9-]*", mount_help))
    for flag in (*variant.requires, *(option.words[0] for option in variant.options if option.needed)):
        if flag not in offered:
            raise Unavailable(f"`ipufs mount --help` offers no {flag}")
    return tuple(word for option in variant.options if option.words[0] in offered for word in option.words)


def cpu_ns(pid: int) -> int:
    """The CPU time of process ``pid`` so far (ns), from its CPU-time clock
    (what clock_getcpuclockid gives): the time on a CPU that each thread's
    /proc/PID/task/TID/schedstat shows first, summed by the kernel over
    every thread, those that have ended included (io_uring's workers and a
    thread pool's may end during a run)."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)  # the kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)


def pin_process(pid: int, cpu: int) -> None:
    """Every thread of process ``pid`` onto ``cpu`` (as `taskset -a -p`
    does); a thread started later inherits its creator's CPU. Nothing on a
    machine with one CPU."""
    if (os.cpu_count() or 1) < 2:
        return
    moved: set[int] = set()
    while True:  # again for threads started meanwhile
        try:
            threads = {int(tid) for tid in os.listdir(f"/proc/{pid}/task")} - moved
        except FileNotFoundError:
            return  # the process ended: the benchmark reports its failure
        if not threads:
            return
        for tid in threads:
            try:
                os.sched_setaffinity(tid, {cpu})
            except ProcessLookupError:
                pass  # it ended
        moved |= threads


@dataclass
class Sample:
    """One server's figures in one round."""

    pinned: list[float]  # MAILBOX_READ_ONLY round trips, ns, client on CPU 0
    free: list[float]  # MAILBOX_READ_ONLY round trips, ns, client placed by the scheduler
    python: list[float]  # SET_IPU_ID round trips, ns, client on CPU 0
    rates: dict[int, float] = field(default_factory=dict)  # clients → ioctls/s
    cpu: dict[int, float] = field(default_factory=dict)  # clients → server CPU ns per ioctl
    #: clients → ioctls/s, the server on CPU 1 and the clients on CPU 0 (one-thread servers only)
    apart: dict[int, float] = field(default_factory=dict)


def measure_server(binary: Path, mnt: Path, pid: int, n: int, seconds: float, one_thread: bool) -> Sample:
    for mode in ("ioctl", "ioctl-count"):  # warm up the server's caches
        run.run_client(binary, mode, mnt, 0, max(n // 8, 100), cpu=None)
    sample = Sample(run.run_client(binary, "ioctl-count", mnt, 0, n),
                    run.run_client(binary, "ioctl-count", mnt, 0, n, cpu=None),
                    run.run_client(binary, "ioctl", mnt, 0, n))
    for clients in CLIENTS:
        before = cpu_ns(pid)
        ioctls = run.rate(binary, mnt, clients, seconds, cpu=None) * seconds
        sample.cpu[clients] = (cpu_ns(pid) - before) / ioctls
        sample.rates[clients] = ioctls / seconds
    if one_thread:  # last: the server stays where it is put until it stops
        pin_process(pid, run.SERVER_CPU)
        for clients in PINNED_CLIENTS:
            sample.apart[clients] = run.rate(binary, mnt, clients, seconds, cpu=run.CLIENT_CPU)
    return sample


@dataclass(frozen=True)
class Server:
    """A server measured in every round: ``start`` mounts it and yields
    its mount point and process id; ``one_thread``: one thread serves, so
    it is also measured pinned apart from its clients."""

    name: str
    start: Callable[[], AbstractContextManager[tuple[Path, int]]]
    one_thread: bool = False


def ipufs_server(variant: Variant, options: tuple[str, ...]) -> Server:
    @contextmanager
    def start() -> Iterator[tuple[Path, int]]:
        with variant.setup():
            try:
                with run.daemon(4, extra=options, cpu=None) as (mnt, pid, _):
                    check_serving(variant, mnt)
                    yield mnt, pid
                    check_serving(variant, mnt)  # still: nothing held the fast path meanwhile
            except run.MountFailed as exc:
                said = [line for line in exc.log.splitlines() if line.strip()]
                raise Unavailable(f"`ipufs mount {' '.join(options)}` failed: "
                                  f"{said[-1] if said else 'no message'}") from None

    return Server(variant.name, start, variant.one_thread)


def command_server(name: str, command: list[str], one_thread: bool = False) -> Server:
    return Server(name, lambda: run.fuse_server(command, None), one_thread)


C_ONE, C_CLONED, PY_FLOOR = "C, 1 thread", "C, cloned threads", "bare Python loop"


def rows(binary: Path, baseline: Path | None, smoke: bool) -> list[run.Row]:
    """The request-path rows of docs/performance.md."""
    rounds = 1 if smoke else run.ROUNDS
    n = 100 if smoke else 4000  # round trips per round and placement
    seconds = 0.1 if smoke else 1.0
    mount_help = subprocess.run([sys.executable, "-m", "ipufs", "mount", "--help"], capture_output=True, text=True,
                                cwd=run.ROOT, check=True).stdout
    servers: list[Server] = []
    unavailable: dict[str, str] = {}
    labels: dict[str, str] = {}
    for variant in VARIANTS:
        try:
            options = mount_options(variant, mount_help)
            labels[variant.name] = variant.label(options)
            servers.append(ipufs_server(variant, options))
        except Unavailable as exc:
            unavailable[variant.name] = str(exc)
    if baseline is not None:
        servers += [command_server(C_ONE, [str(baseline)], one_thread=True),
                    command_server(C_CLONED, [str(baseline), "--mt"])]
    servers.append(command_server(PY_FLOOR, [sys.executable, str(HERE / "python_floor.py")]))
    samples: dict[str, list[Sample]] = {server.name: [] for server in servers}
    for r in range(rounds):
        for server in servers[r % len(servers):] + servers[:r % len(servers)]:
            if server.name in unavailable:
                continue
            try:
                with server.start() as (mnt, pid):
                    samples[server.name].append(measure_server(binary, mnt, pid, n, seconds, server.one_thread))
            except Unavailable as exc:
                unavailable[server.name] = str(exc)
                samples[server.name] = []  # rounds measured before this one pair with nothing now
    return table(samples, unavailable, labels, [c for c in (C_ONE, C_CLONED) if samples.get(c)])


def _ratios(ours: list[Sample], theirs: list[Sample], of: Callable[[Sample], float]) -> str:
    return run.spread([of(a) / of(b) for a, b in zip(ours, theirs, strict=True)])


def _trips(which: Callable[[Sample], list[float]]) -> Callable[[list[Sample]], str]:
    """p50 / p99 of the round trips of every round."""
    def show(rounds: list[Sample]) -> str:
        every = [x for s in rounds for x in which(s)]
        return f"{run.us(run.p50(every))} / {run.us(run.p99(every))}"
    return show


def _rate(clients: int) -> Callable[[Sample], float]:
    return lambda s: s.rates[clients]


def _cpu(clients: int) -> Callable[[Sample], float]:
    return lambda s: s.cpu[clients]


def _apart(clients: int) -> Callable[[Sample], float]:
    return lambda s: s.apart[clients]


def _apart_trip(s: Sample) -> float:
    """One client's mean round trip (ns), server and client pinned apart:
    one over its rate."""
    return 1e9 / s.apart[1]


def _median(of: Callable[[Sample], float], form: Callable[[float], str]) -> Callable[[list[Sample]], str]:
    """The median over the rounds."""
    return lambda rounds: form(statistics.median(of(s) for s in rounds))


@dataclass(frozen=True)
class Figure:
    """A figure of the table: ``of`` a round's sample gives the number whose
    ratios are taken; ``show`` writes it for all the rounds; ``goals`` by
    variant name; ``apart``: measured with server and clients pinned apart,
    so only of the servers that serve on one thread."""

    name: str
    of: Callable[[Sample], float]
    show: Callable[[list[Sample]], str]
    goals: dict[str, str] = field(default_factory=dict)
    apart: bool = False

    def has(self, rounds: list[Sample]) -> bool:
        """Whether these rounds measured it."""
        return bool(rounds) and (not self.apart or all(s.apart for s in rounds))


def _clients(n: int) -> str:
    return f"{n} client{'s' if n > 1 else ''}"


_EQUAL = "p50 ≤ 1.0× C, 1 thread"
_APART = "server pinned to CPU 1, clients to CPU 0"
#: The goal of a faster path's figures that have none of their own.
NO_REGRESSION = "no worse than classic"
FIGURES = (
    Figure("ioctl round trip (MAILBOX_READ_ONLY count), client pinned, p50 / p99", lambda s: run.p50(s.pinned),
           _trips(lambda s: s.pinned)),
    Figure("ioctl round trip (MAILBOX_READ_ONLY count), client unpinned, p50 / p99", lambda s: run.p50(s.free),
           _trips(lambda s: s.free), {"fast path": _EQUAL, "io_uring": _EQUAL}),
    Figure("ioctl round trip (SET_IPU_ID, served in Python), client pinned, p50 / p99",
           lambda s: run.p50(s.python), _trips(lambda s: s.python)),
    *(Figure(f"sustained ioctls/s, {_clients(n)}", _rate(n), _median(_rate(n), lambda x: f"{x:,.0f}"),
             {"fast path": "≥ 1.0× C, 1 thread", "io_uring": "≥ 1.5× C, 1 thread"} if n == 8 else {})
      for n in CLIENTS),
    *(Figure(f"server CPU per ioctl, {_clients(n)}", _cpu(n),
             _median(_cpu(n), lambda x: f"{x / 1000:.1f} µs")) for n in CPU_CLIENTS),
    Figure(f"{_APART}: ioctl round trip (MAILBOX_READ_ONLY count), 1 client, mean (one over its rate)", _apart_trip,
           _median(_apart_trip, run.us), apart=True),
    *(Figure(f"{_APART}: sustained ioctls/s, {_clients(n)}", _apart(n), _median(_apart(n), lambda x: f"{x:,.0f}"),
             apart=True) for n in PINNED_CLIENTS),
)


def table(samples: dict[str, list[Sample]], unavailable: dict[str, str], labels: dict[str, str],
          c_servers: Sequence[str]) -> list[run.Row]:
    """Rows from the rounds' samples (by server name): per figure, one per
    variant measured (shown by ``labels``), its baseline column giving each
    C server's figure and its ratio column the ratios to them, in the same
    order; then one row per variant not available, saying why; then the
    classic path against the bare Python loop."""
    out: list[run.Row] = []
    for figure in FIGURES:
        theirs = [c for c in c_servers if figure.has(samples[c])]
        for variant in (v for v in VARIANTS if figure.has(samples.get(v.name, []))):
            ours = samples[variant.name]
            if theirs:
                baseline = "; ".join(f"{c}: {figure.show(samples[c])}" for c in theirs)
                ratio = "; ".join(_ratios(ours, samples[c], figure.of) for c in theirs)
            elif c_servers:  # a figure of the one-thread servers, and the C one is not among them
                baseline, ratio = "—", "—"
            else:
                baseline, ratio = "C libfuse3 server: not built (install libfuse3-dev)", "—"
            out.append(run.Row(f"{figure.name} — {labels[variant.name]}", figure.show(ours), baseline, ratio,
                               figure.goals.get(variant.name, NO_REGRESSION if variant is not VARIANTS[0] else "—")))
    for variant in VARIANTS:
        if variant.name in unavailable:
            out.append(run.Row(f"ipufs request path — {variant.label()}",
                               f"not available: {unavailable[variant.name]}", "—", "—", "—"))
    # The language's floor: the Python request path against a bare Python
    # loop answering the same ioctl.
    classic = VARIANTS[0].name
    if samples.get(PY_FLOOR) and samples.get(classic):
        ours, floor = samples[classic], samples[PY_FLOOR]
        against = f"{labels[classic]}, against the bare Python loop (benchmarks/python_floor.py)"
        for figure in FIGURES[2:3 + len(CLIENTS)]:  # SET_IPU_ID's round trip and the rates
            out.append(run.Row(f"{figure.name}, {against}", figure.show(ours), f"{PY_FLOOR}: {figure.show(floor)}",
                               _ratios(ours, floor, figure.of), "—"))
    return out


def main() -> int:
    import rows_main

    return rows_main.print_rows(__doc__, lambda smoke: [
        (r.figure, r.value, r.baseline, r.ratio, r.goal)
        for r in rows(run.build(), run.build_baseline(), smoke)])


if __name__ == "__main__":
    sys.exit(main())
