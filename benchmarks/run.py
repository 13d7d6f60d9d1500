"""Measure ipufs against its physical limits and write docs/performance.md.

    sudo ./dev bench            # the full run (about 10 minutes on 2 CPUs), rewrites docs/performance.md
    sudo ./dev bench --smoke    # seconds: checks the harness works, writes nothing

Each figure is taken in the same run as its baseline (the machines are
noisy, so ratios from one run are what mean something). Latencies are
reported as median (p50) and 99th percentile over the repetitions.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "benchmarks" / "build"
DOC = ROOT / "docs" / "performance.md"


#: Rounds in which ipufs and the C server are measured in turn.
ROUNDS = 5
#: The pause between two device events in the interrupt latency run.
EVENT_GAP = 500e-6
#: How long a daemon may take to mount before the run gives up (s): far
#: above the mount-time rows' figures, since a busy machine stretches
#: them many times over (1024 IPUs took over 60 s at a load average of 9).
MOUNT_TIMEOUT = 300


#: Clients run on one CPU and servers (ipufs or the C server) on another,
#: as IPC benchmarks pin them: left to itself the scheduler sometimes puts
#: a client and its server on one CPU and sometimes not, and a round trip
#: differs by half between the two (the C server's: 9 against 14 µs here).
CLIENT_CPU, SERVER_CPU = 0, 1


def _pin(cpu: int) -> None:
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {cpu})


def placed(cpu: int | None) -> Callable[[], None] | None:
    """What a child process runs before its program: pinned to ``cpu``,
    or left to the scheduler (None)."""
    return None if cpu is None else (lambda: _pin(cpu))


def on_client_cpu() -> None:
    _pin(CLIENT_CPU)


def on_server_cpu() -> None:
    _pin(SERVER_CPU)


@dataclass
class Row:
    figure: str
    value: str
    baseline: str
    ratio: str
    goal: str


def stop(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Terminate a server process, killing it if it does not go in time."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def build() -> Path:
    BUILD.mkdir(exist_ok=True)
    binary = BUILD / "bench_client"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native" / "include"),
                    "-o", str(binary), str(ROOT / "benchmarks" / "bench_client.c")], check=True)
    return binary


def build_compat() -> Path:
    binary = BUILD / "compat_client"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native" / "include"),
                    "-o", str(binary), str(ROOT / "benchmarks" / "compat_client.c")], check=True)
    return binary


def compat_rows(smoke: bool) -> list[Row]:
    """What the compatibility library costs: the real driver's ATTACH and
    SET_IPU_ID through it against ipu.h's forms without it, and stat and
    ioctl on a file of another filesystem with and without it, in
    alternating rounds."""
    from ipufs import compat

    binary = build_compat()
    preload = compat.preload(dict(os.environ))
    rounds, n = (2, 200) if smoke else (ROUNDS, 4000)
    pairs: dict[str, tuple[list[float], list[float], list[float]]] = {}

    def measured(name: str, with_args: list[object], without_args: list[object]) -> None:
        with_lib, without, ratios = pairs.setdefault(name, ([], [], []))
        a = run_client(binary, *with_args, env=preload)
        b = run_client(binary, *without_args)
        with_lib += a
        without += b
        ratios.append(p50(a) / p50(b))

    with daemon(1) as (mnt, _, _), tempfile.NamedTemporaryFile(dir=BUILD) as plain, fresh_tmpfs() as checked:
        run_client(binary, "attach", mnt, 0, n // 4, "ipu.h")  # warm up
        for _ in range(rounds):
            attach = ["attach", mnt, 0, n // rounds]
            measured("attach", [*attach, "real"], [*attach, "ipu.h"])
            for call in ("stat", "ioctl"):
                measured(call, [call, plain.name, n // rounds], [call, plain.name, n // rounds])
            measured("stat-checked", ["stat", checked, n // rounds], ["stat", checked, n // rounds])
            mmio = ["mmio", mnt, 0, n // rounds // 4]
            measured("mmio-store", [*mmio, "store"], [*mmio, "pwrite"])
            measured("mmio-load", [*mmio, "load"], [*mmio, "load"])
    rows = []
    for name, figure in (("attach", "ATTACH + SET_IPU_ID round trip, p50: the real driver's forms through the "
                                    "compatibility library / ipu.h's forms without it"),
                         ("stat", "stat of a file of another filesystem, with / without the library (per call)"),
                         ("stat-checked", "stat of a tmpfs file the library must check (anonymous device, "
                                          "inode number 2), with / without the library (per call)"),
                         ("ioctl", "ioctl (FIONREAD) on a file of another filesystem, with / without the library"),
                         ("mmio-store", "a store to a register through a mapping of ipuN, p50: emulated by the "
                                        "library (fault, decode, pwrite) / a pwrite of it without the library"),
                         ("mmio-load", "a load of a register through a mapping of ipuN (passthrough), with / "
                                       "without the library")):
        with_lib, without, ratios = pairs[name]
        scale = us if name in ("attach", "mmio-store") else (lambda ns: f"{ns:.0f} ns")
        goal = "—" if name == "stat-checked" else "≤ 1.1×" if name == "mmio-store" else "≤ 1.05×"
        rows.append(Row(figure, scale(p50(with_lib)), scale(p50(without)), spread(ratios), goal))
    return rows


@contextmanager
def fresh_tmpfs() -> Iterator[Path]:
    """The first file of a new tmpfs: a regular file on an anonymous device
    with an ipufs node's inode number (2), which the compatibility library
    checks (docs/compat.md); unmounted afterwards."""
    with tempfile.TemporaryDirectory(prefix="ipufs-bench-tmpfs-") as where:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "ipufs-bench", where], check=True, timeout=30)
        try:
            path = Path(where) / "a"
            path.write_bytes(b"plain")
            yield path
        finally:
            subprocess.run(["umount", where], timeout=30)


def build_baseline() -> Path | None:
    """The libfuse3 yardstick, when libfuse3-dev is installed."""
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True)
    if flags.returncode != 0:
        return None
    binary = BUILD / "fuse_baseline"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(binary), str(ROOT / "benchmarks" / "fuse_baseline.c"),
                    *flags.stdout.split()], check=True)
    return binary


@contextmanager
def baseline_server(command: list[str] | None) -> Iterator[Path | None]:
    """A baseline FUSE server (``command`` MOUNTPOINT, which prints "ready"
    once mounted) on the servers' CPU; yields its mount point."""
    if command is None:
        yield None
        return
    with fuse_server(command, SERVER_CPU) as (mnt, _):
        yield mnt


@contextmanager
def fuse_server(command: list[str], cpu: int | None) -> Iterator[tuple[Path, int]]:
    """A FUSE server (``command`` MOUNTPOINT, which prints "ready" once
    mounted) pinned to ``cpu`` (None: anywhere); yields its mount point and
    process id, and stops it afterwards."""
    with tempfile.TemporaryDirectory(prefix="ipufs-baseline-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        proc = subprocess.Popen([*command, str(mnt)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                preexec_fn=placed(cpu), text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            yield mnt, proc.pid
        finally:
            stop(proc, 10)
            subprocess.run(["umount", "-l", str(mnt)], stderr=subprocess.DEVNULL)


def rate(binary: Path, mnt: Path, clients: int, seconds: float, cpu: int | None = CLIENT_CPU) -> float:
    """ioctls per second, summed over ``clients`` processes at once, all
    pinned to ``cpu`` (None: placed by the scheduler)."""
    procs = [subprocess.Popen([str(binary), "ioctl-rate", str(mnt), "0", str(seconds)], stdout=subprocess.PIPE,
                              preexec_fn=placed(cpu),
                              text=True) for _ in range(clients)]
    total = sum(int(p.communicate()[0]) for p in procs)
    return total / seconds


def run_client(binary: Path, *args: object, env: dict[str, str] | None = None,
               cpu: int | None = CLIENT_CPU) -> list[float]:
    """Run bench_client pinned to ``cpu`` (None: placed by the scheduler);
    its numbers."""
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=600,
                          preexec_fn=placed(cpu), env=env)
    if done.returncode != 0:
        raise RuntimeError(f"bench_client {' '.join(map(str, args))}: {done.stderr.strip()}")
    return [float(x) for x in done.stdout.split()]


def spread(ratios: list[float]) -> str:
    """The median of per-round ratios, with their range."""
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def p99(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]


def us(ns: float) -> str:
    return f"{ns / 1000:.1f} µs"


class MountFailed(RuntimeError):
    """`ipufs mount` exited, or did not mount in time; ``log`` is what it wrote."""

    def __init__(self, log: str) -> None:
        super().__init__(f"daemon did not mount: {log}")
        self.log = log


@contextmanager
def daemon(ipus: int, profile: str = "ipu2", checkout: Path = ROOT,
           extra: tuple[str, ...] = (), cpu: int | None = SERVER_CPU) -> Iterator[tuple[Path, int, float]]:
    """A real `ipufs mount` process of ``checkout`` (run by its .venv's
    Python, from its own directory: `python -m` imports from there), with
    ``extra`` mount options, pinned to ``cpu`` (None: anywhere); yields
    (mountpoint, pid, seconds to serve)."""
    python = sys.executable if checkout == ROOT else str(checkout / ".venv" / "bin" / "python")
    with tempfile.TemporaryDirectory(prefix="ipufs-bench-") as tmp:
        mnt = Path(tmp) / "mnt"
        start = time.monotonic()
        log = Path(tmp) / "daemon.log"
        options = ["--no-link-dev", *extra]
        if "--no-cdi" in subprocess.run([python, "-m", "ipufs", "mount", "--help"], cwd=checkout,
                                        capture_output=True, text=True).stdout:
            options.append("--no-cdi")  # older checkouts write no CDI spec anyway
        with open(log, "w") as stderr:
            proc = subprocess.Popen([python, "-m", "ipufs", "mount", str(mnt), "--ipus", str(ipus),
                                     "--profile", profile, *options], stdout=subprocess.DEVNULL,
                                    stderr=stderr, preexec_fn=placed(cpu), cwd=checkout)
        try:
            while True:
                try:
                    if os.getxattr(mnt, "user.ipufs.pid") == str(proc.pid).encode():
                        break
                except OSError:
                    pass
                if proc.poll() is not None:
                    raise MountFailed(log.read_text())
                if time.monotonic() - start > MOUNT_TIMEOUT:
                    raise MountFailed(f"{log.read_text()}\nnot mounted after {MOUNT_TIMEOUT} s")
                time.sleep(0.005)
            yield mnt, proc.pid, time.monotonic() - start
        finally:
            stop(proc, 20)
            unmount_if_left(mnt)


def unmount_if_left(mnt: Path) -> None:
    """A daemon that had to be killed leaves its mount behind, answering
    ENOTCONN: detach it, so a benchmark never leaves a mount."""
    with open("/proc/self/mounts") as f:
        left = any(line.split()[1] == str(mnt) for line in f)
    if left:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def measure(smoke: bool) -> list[Row]:
    binary = build()
    n_lat = 50 if smoke else 2000
    n_ioctl = 200 if smoke else 20000
    rounds = 2 if smoke else ROUNDS
    import request_path  # benchmarks/request_path.py: ipufs's request paths against the C server's two forms

    rows: list[Row] = request_path.rows(binary, build_baseline(), smoke)
    python_floor = [sys.executable, str(ROOT / "benchmarks" / "python_floor.py")]
    with daemon(4) as (mnt, pid, _), baseline_server(python_floor) as pmnt:
        run_client(binary, "ioctl", mnt, 0, n_ioctl // 4)  # warm up the daemon's caches
        daemon_us = in_process_us(smoke)
        rows.append(Row("daemon time of one ioctl in process, no kernel (SET_IPU_ID / MAILBOX_READ_ONLY)",
                        " / ".join(f"{t:.1f} µs" for t in daemon_us.values()), "—", "—", "—"))
        untraced = run_client(binary, "ioctl", mnt, 0, n_ioctl)
        tracer = subprocess.Popen([sys.executable, "-m", "ipufs", "trace", "--json", "--dev", str(mnt)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)  # let it subscribe
            traced = run_client(binary, "ioctl", mnt, 0, n_ioctl)
        finally:
            tracer.terminate()
            tracer.wait()
        rows.append(Row("tracing off: the checks an ioctl passes (2), per ioctl", f"{off_cost_ns():.0f} ns",
                        f"ioctl round trip: {us(p50(untraced))}",
                        f"{off_cost_ns() / p50(untraced) * 100:.3f} %", "nothing measurable"))
        rows.append(Row("ioctl round trip with `ipufs trace` attached, p50",
                        us(p50(traced)), f"tracing off, measured just before: {us(p50(untraced))}",
                        f"{p50(traced) / p50(untraced):.2f}×", "off: one attribute check per site"))
        # The floors: one process signals another, the sender on the
        # servers' CPU and the receiver on the clients', as the daemon
        # signals a client.
        sender = SERVER_CPU if (os.cpu_count() or 1) > 1 else -1
        floor = run_client(binary, "sigqueue-floor", n_lat, 0, sender)
        # Events come EVENT_GAP apart, so the client sleeps between them:
        # the floor for them is a sigqueue paced the same way.
        paced = run_client(binary, "sigqueue-floor", n_lat, int(EVENT_GAP * 1e6), sender)
        events = event_latency(binary, mnt, n_lat)
        rows.append(Row("device event → client's signal (interrupt latency), p50 / p99",
                        f"{us(p50(events))} / {us(p99(events))}",
                        f"sigqueue between two processes, {EVENT_GAP * 1e6:.0f} µs apart: "
                        f"{us(p50(paced))} / {us(p99(paced))}",
                        f"{p50(events) / p50(paced):.1f}×", "p50 ≤ 2 × floor"))
        for mode, label in (("doorbell-pwrite", "pwrite CMD_SYNC → signal 46"),
                            ("doorbell-mapped", "mapped store CMD_SYNC → signal 46"),
                            ("doorbell-ioctl", "MAILBOX_WRITE_ONLY ioctl → signal 45")):
            lat = run_client(binary, mode, mnt, 1, n_lat)
            rows.append(Row(f"{label}, p50 / p99", f"{us(p50(lat))} / {us(p99(lat))}",
                            f"sigqueue between two processes: {us(p50(floor))} / {us(p99(floor))}",
                            f"{p50(lat) / p50(floor):.1f}×",
                            "mapped: p50 < 200 µs"))
        # Copies and file I/O, too, alternate with their baselines round by
        # round: the ratio is the median of the rounds' ratios.
        for size, label, reps in ((1 << 20, "1 MiB", 10), (256 << 20, "256 MiB", 1)):
            if smoke and size > 1 << 20:
                continue
            bar, plain, ratios = [], [], []
            for _ in range(rounds):
                b = run_client(binary, "copy", mnt / "ipu0_ex", size, 5 if smoke else reps)
                p = run_client(binary, "copy-memfd", size, 5 if smoke else reps)
                bar += b
                plain += p
                ratios.append(p50(b) / p50(p))
            rows.append(Row(f"memcpy into the ipu0_ex mapping, {label}", f"{p50(bar):,.0f} MiB/s",
                            f"plain memfd mapping: {p50(plain):,.0f} MiB/s", spread(ratios), "≥ 0.95×"))
        with tempfile.NamedTemporaryFile(dir="/dev/shm") as tmpfs:
            tmpfs.truncate(64 << 20)
            for size, label in ((4096, "4 KiB"), (1 << 20, "1 MiB")):
                reps = 20 if smoke else (4000 if size == 4096 else 100)
                mem, ref, bare, ratios, bare_ratios = [], [], [], [], []
                before = requests(mnt)
                for _ in range(rounds):
                    m = run_client(binary, "pio", mnt / "ipu0_mem", size, reps)
                    r = run_client(binary, "pio", tmpfs.name, size, reps)
                    assert pmnt is not None
                    f = run_client(binary, "pio", pmnt / "mem", size, reps)
                    mem += m
                    ref += r
                    bare += f
                    ratios.append(p50(m) / p50(r))
                    bare_ratios.append(p50(m) / p50(f))
                served = requests(mnt) - before  # opens, releases, a first write's xattr: no I/O
                rows.append(Row(f"ipu0_mem pwrite+pread, {label} (requests the daemon saw: {served})",
                                f"{p50(mem):,.0f} MiB/s", f"tmpfs: {p50(ref):,.0f} MiB/s", spread(ratios),
                                "≥ 0.9×"))
                # The kernel's share: the same calls on a passthrough file
                # of a server that does nothing else.
                rows.append(Row(f"ipu0_mem pwrite+pread, {label}, against a bare passthrough file "
                                "(benchmarks/python_floor.py's `mem`)",
                                f"{p50(mem):,.0f} MiB/s", f"bare passthrough file: {p50(bare):,.0f} MiB/s",
                                spread(bare_ratios), "—"))
        rows.append(Row("daemon RSS, 4 IPUs serving", f"{rss_mib(pid):.0f} MiB", "—", "—", "—"))
    for count in (4, 64) if smoke else (4, 64, 256, 1024):
        with daemon(count) as (_, pid, seconds):
            rows.append(Row(f"mount {count} × ipu2: time to serving / daemon RSS",
                            f"{seconds:.2f} s / {rss_mib(pid):.0f} MiB", "—", "—",
                            "1024 IPUs: < 3 s and < 200 MB" if count == 1024 else "—"))
    # ipu1: 512 MiB exchange BARs (public sizes) and per-tile TDI registers in config space
    with daemon(64, "ipu1") as (_, pid, seconds):
        rows.append(Row("mount 64 × ipu1: time to serving / daemon RSS",
                        f"{seconds:.2f} s / {rss_mib(pid):.0f} MiB", "—", "—", "—"))
    rows += compat_rows(smoke)
    import isa_decode  # benchmarks/isa_decode.py, beside this script

    rows += [Row(*r) for r in isa_decode.rows(smoke)]
    import execution  # benchmarks/execution.py

    rows += [Row(*r) for r in execution.rows(smoke)]
    import execution_daemon  # benchmarks/execution_daemon.py

    rows += [Row(*r) for r in execution_daemon.rows(smoke)]
    import exchange  # benchmarks/exchange.py

    rows += [Row(*r) for r in exchange.rows(smoke)]
    import execution_speed  # benchmarks/execution_speed.py

    rows += [Row(*r) for r in execution_speed.rows(smoke)]
    return rows


def event_latency(binary: Path, mnt: Path, n: int) -> list[float]:
    """Interrupts raised by the device side (the control socket's
    `interrupt` fault with `stamp`), timed from the daemon's stamp to the
    client's sigtimedwait returning."""
    from ipufs.client import Control

    client = subprocess.Popen([str(binary), "event-latency", str(mnt), "2", str(n)], stdout=subprocess.PIPE,
                              preexec_fn=on_client_cpu,
                              text=True)
    assert client.stdout is not None and client.stdout.readline().strip() == "ready"
    with Control.of_mount(mnt) as control:
        for _ in range(n):
            control.inject("interrupt", 2, source="gs1_e0", stamp=True)
            time.sleep(EVENT_GAP)
    out, _ = client.communicate(timeout=60)
    return [float(x) for x in out.split()]


def requests(mnt: Path) -> int:
    """FUSE requests the daemon has handled (its control socket's status)."""
    from ipufs.client import Control

    with Control.of_mount(mnt) as control:
        return int(control.status()["requests"])


def in_process_us(smoke: bool) -> dict[str, float]:
    """Daemon time of one ioctl without the kernel: a Session over a real
    IpuFilesystem (4 × ipu2) handling the request message a read from
    /dev/fuse would give, from decoding to the framed reply (µs, best of
    five), on the servers' CPU."""
    import signal
    import timeit

    import threading

    from ipufs.abi import ioctls as dabi
    from ipufs.driver.activity import RegisterUse
    from ipufs.driver.devices import DeviceSet
    from ipufs.driver.driver import IpuDriver
    from ipufs.driver.effects import ModelEffects
    from ipufs.driver.work import DeviceWork
    from ipufs.driver.events import NoEvents
    from ipufs.driver.device_nodes import DeviceNodes, NoCounting, NoFastPath
    from ipufs.driver.filesystem import IpuFilesystem
    from ipufs.driver.nodes import Ownership
    from ipufs.driver.view_files import SysfsView
    from ipufs.driver.mapping import BarMapping
    from ipufs.driver import sysfs_tree
    from ipufs.driver.pollers import PollWakeups
    from ipufs.driver.watch import PidfdWatcher
    from ipufs.fuse import abi
    from ipufs.fuse.session import Session
    from ipufs.model.profile import PROFILES

    signal.pthread_sigmask(signal.SIG_BLOCK, range(44, 50))  # we attach ourselves

    class NoKernel:
        """A kernel that takes every backing file: the mapping stays in
        passthrough mode (the default), where model writes need no
        publishing, as in a real mount."""

        def backing_open(self, fd: int) -> int:
            return 1

        def notify(self, message: bytes, lost: object = None) -> None:
            pass

        def call_after(self, action: object) -> bool:
            return False

    affinity = os.sched_getaffinity(0)
    on_server_cpu()
    devices = DeviceSet(PROFILES["ipu2"], 4)
    try:
        # Wired as ipufs/daemon/daemon.py wires it, with no kernel behind it.
        tree, kernel = sysfs_tree.node_tree(len(devices)), NoKernel()
        driver = IpuDriver(devices, exits=PidfdWatcher(lock=threading.RLock()), events=NoEvents())
        use, lock = RegisterUse(), threading.RLock()
        mapping = BarMapping(devices, tree, kernel, passthrough=True, use=use)
        effects = ModelEffects(mapping, driver, PollWakeups(devices, kernel), lock=lock)
        work = DeviceWork(effects, use, lock=lock)
        nodes = DeviceNodes(devices, tree, driver=driver, mapping=mapping, pollers=effects.pollers, work=work,
                            use=use, accesses=NoCounting(), fast=NoFastPath())
        filesystem = IpuFilesystem(devices, tree, nodes=nodes, view=SysfsView(devices, tree), mapping=mapping,
                                   ownership=Ownership(), control_path="")
        session = Session(filesystem, passthrough=True)
        pid, unique = os.getpid(), 0

        def call(opcode: int, nodeid: int, body: bytes) -> bytes:
            nonlocal unique
            unique += 1
            message = abi.IN_HEADER.pack(abi.IN_HEADER.size + len(body), opcode, unique, nodeid, 0, 0, pid,
                                         0, 0) + body
            reply = session.handle(message)
            assert reply is not None and abi.OUT_HEADER.unpack_from(reply)[1] == 0, reply
            return reply[abi.OUT_HEADER.size:]

        O = abi.Opcode
        call(O.INIT, 0, abi.INIT_IN.pack(7, 44, 131072, 0xFFFFFFFF, abi.InitFlag.PASSTHROUGH >> 32))
        (nodeid,) = struct.unpack_from("<Q", call(O.LOOKUP, 1, b"ipu0\0"))
        (fh,) = struct.unpack_from("<Q", call(O.OPEN, nodeid, abi.OPEN_IN.pack(os.O_RDWR, 0)))
        by_name = {spec.name: spec for spec in dabi.IOCTLS}

        def ioctl(cmd: int, arg: int = 0, out_size: int = 0) -> bytes:
            return abi.IN_HEADER.pack(abi.IN_HEADER.size + abi.IOCTL_IN.size, O.IOCTL, 1 << 40, nodeid, 0, 0,
                                      pid, 0, 0) + abi.IOCTL_IN.pack(fh, 0, cmd, arg, 0, out_size)

        call(O.IOCTL, nodeid, ioctl(by_name["ATTACH"].cmd)[abi.IN_HEADER.size:])
        messages = {
            "SET_IPU_ID": ioctl(by_name["SET_IPU_ID"].cmd, 7),
            "MAILBOX_READ_ONLY": ioctl(dabi.ioc(dabi.Dir.READ, by_name["MAILBOX_READ_ONLY"].nr, 8), 0, 8),
        }
        n = 2_000 if smoke else 100_000
        times = {}
        for name, message in messages.items():
            view = memoryview(bytearray(message))
            assert abi.OUT_HEADER.unpack_from(session.handle(view) or b"")[1] == 0, name
            times[name] = min(timeit.repeat(lambda: session.handle(view), number=n, repeat=5)) / n * 1e6
        return times
    finally:
        devices.close()
        os.sched_setaffinity(0, affinity)


def off_cost_ns() -> float:
    """What tracing costs when off on the ioctl path: the `tracer.enabled`
    checks an ioctl passes (the filesystem's and the driver's), timed."""
    import timeit

    from ipufs.daemon.trace import Tracer

    tracer = Tracer()
    n = 1_000_000
    seconds = min(timeit.repeat("if t.enabled: pass\nif t.enabled: pass", globals={"t": tracer},
                                number=n, repeat=5))
    return seconds / n * 1e9


def table(rows: list[Row]) -> str:
    lines = ["| figure | ipufs | baseline, same run | ratio | goal |", "|---|---|---|---|---|"]
    lines += [f"| {r.figure} | {r.value} | {r.baseline} | {r.ratio} | {r.goal} |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.machine())
    return (f"{cpu}, {os.cpu_count()} cores; Linux {platform.release()}; "
            f"Python {platform.python_version()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a seconds-long run that writes nothing")
    args = parser.parse_args()
    load, start = load_average(), time.monotonic()
    rows = measure(args.smoke)
    load = f"{load} when the run began, {load_average()} when it ended"
    text = table(rows)
    print(text)
    print(f"\n1-minute load average: {load}; the run took {time.monotonic() - start:.0f} s")
    if not args.smoke:
        DOC.write_text(render(text, load))
        print(f"\nwrote {DOC.relative_to(ROOT)}")
    return 0


def load_average() -> str:
    """The 1-minute load average (/proc/loadavg): how busy the machine was
    with other work, next to the run's figures."""
    return Path("/proc/loadavg").read_text().split()[0]


def render(text: str, load: str) -> str:
    template = (ROOT / "benchmarks" / "performance.md.in").read_text()
    return template.replace("@MACHINE@", machine()).replace("@DATE@", time.strftime("%Y-%m-%d")).replace(
        "@LOAD@", load).replace("@TABLE@", text)


if __name__ == "__main__":
    sys.exit(main())
