# Running a real ipufs mount inside the test process: the daemon's trio loop
# in a thread (so tests reach its model directly), clients in subprocesses
# (so a page fault that waits on the daemon never waits on our GIL). Every
# mount is unmounted in a finally, with timeouts, whatever happens.
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

import trio

from ipufs.daemon.config import DaemonConfig
from ipufs.daemon.daemon import Daemon
from ipufs.fuse import mount as fmount

T = TypeVar("T")
TIMEOUT = 10.0
#: Seconds a test waits for a mount (a daemon starting, or stopping) before
#: it gives up. Generous, as every such wait polls and ends as soon as the
#: mount answers: on a two-core machine at a load average of 4.4 (a full
#: run beside other work) a mount took over 10 s to answer.
MOUNT_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]
#: The fuse module's switch for FUSE over io_uring (set by root only).
ENABLE_URING = Path("/sys/module/fuse/parameters/enable_uring")
#: Held (flock) by whoever changes ENABLE_URING for a while, so that two
#: runs on one machine never restore each other's value.
URING_LOCK = "/tmp/ipufs-enable-uring.lock"
#: How mounts made here get their requests: "classic" (/dev/fuse) or
#: "uring" (FUSE over io_uring). Set for one test by on_transport (the
#: fuse_transport fixture of tests/conftest.py).
transport = "classic"
#: how many uring_parameter blocks of this process are open (URING_LOCK is
#: held while any is)
_uring_depth = 0


@contextmanager
def uring_parameter(value: str) -> Iterator[None]:
    """The fuse module's enable_uring is ``value`` inside (URING_LOCK
    held), and what it was before on every path out."""
    global _uring_depth
    with contextlib.ExitStack() as held:
        if not _uring_depth:  # the outermost block locks: a second flock by this process would wait for itself
            fcntl.flock(held.enter_context(open(URING_LOCK, "a")), fcntl.LOCK_EX)
        _uring_depth += 1
        held.callback(_uring_released)
        old = ENABLE_URING.read_text().strip()
        try:
            ENABLE_URING.write_text(value)
            yield
        finally:
            ENABLE_URING.write_text(old)


def _uring_released() -> None:
    global _uring_depth
    _uring_depth -= 1


@contextmanager
def on_transport(name: str) -> Iterator[None]:
    """Mounts made inside use transport ``name``; for "uring", the fuse
    module's enable_uring is Y meanwhile (uring_parameter)."""
    global transport
    before = transport
    with uring_parameter("Y") if name == "uring" else contextlib.nullcontext():
        transport = name
        try:
            yield
        finally:
            transport = before


def uring_option() -> str:
    """The --uring value that gives the current transport."""
    return "on" if transport == "uring" else "off"


class RunningDaemon:
    def __init__(self, daemon: Daemon, token: trio.lowlevel.TrioToken) -> None:
        self.daemon = daemon
        self.token = token
        self.mountpoint = Path(daemon.config.mountpoint)

    def call(self, action: Callable[[], T]) -> T:
        """Run a model-side action in the daemon's loop, then publish."""
        return trio.from_thread.run(self.daemon.call_and_wait, action, trio_token=self.token)

    def path(self, name: str) -> str:
        return str(self.mountpoint / name)


def abort_connection(mountpoint: str) -> None:
    """Abort the FUSE connection mounted at ``mountpoint`` (its requests
    fail with ENOTCONN), found in mountinfo: touching the mount itself
    could wait on the requests that hang."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == mountpoint:
                Path(f"/sys/fs/fuse/connections/{fields[2].split(':')[1]}/abort").write_text("1")


def force_unmount(mountpoint: str) -> None:
    if any(m.mountpoint == mountpoint for m in fmount.mounts()):
        fmount.unmount(mountpoint)


@contextmanager
def running_daemon(mountpoint: Path, **options: object) -> Iterator[RunningDaemon]:
    options.setdefault("transports", {"uring": uring_option()})
    config = DaemonConfig(mountpoint=str(mountpoint), **options)  # type: ignore[arg-type]
    daemon = Daemon(config)
    ready = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            box["scope"] = nursery.cancel_scope
            box["token"] = trio.lowlevel.current_trio_token()
            await nursery.start(daemon.run)
            ready.set()

    def thread() -> None:
        # The driver signals attached processes; should this test process
        # attach, the daemon's threads must never take 44..49 themselves.
        signal.pthread_sigmask(signal.SIG_BLOCK, range(44, 50))
        try:
            trio.run(main)
        except BaseException as exc:  # reported to the test below
            box["error"] = exc
        finally:
            ready.set()

    t = threading.Thread(target=thread, name="ipufs-daemon", daemon=True)
    t.start()
    try:
        if not ready.wait(MOUNT_TIMEOUT) or "error" in box:
            raise RuntimeError(f"daemon did not start: {box.get('error')!r}")
        if config.transports.get("uring") == "on":  # what the test asked for, not a quiet fallback
            assert daemon.transport_in_force().startswith("FUSE over io_uring"), daemon.transport_in_force()
        yield RunningDaemon(daemon, box["token"])  # type: ignore[arg-type]
    finally:
        if t.is_alive() and "token" in box:
            try:
                trio.from_thread.run_sync(box["scope"].cancel, trio_token=box["token"])  # type: ignore[attr-defined]
            except trio.RunFinishedError:
                pass
        t.join(MOUNT_TIMEOUT)
        force_unmount(str(mountpoint))
        if "error" in box and not isinstance(box["error"], trio.Cancelled):
            raise RuntimeError("daemon failed") from box["error"]  # type: ignore[arg-type]


class LineClient:
    """A client process obeying one command per line on stdin and answering
    one line each (tests/c/bar_client.c, native/src/ipu_client.c...)."""

    def __init__(self, argv: list[str], greeting: str, **popen: object) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]
        self.greeting = self._line()
        if not self.greeting.startswith(greeting):
            err = self.proc.stderr.read() if self.proc.stderr else ""
            self.close()
            raise RuntimeError(f"client failed: {self.greeting!r} {err}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        t.start()
        t.join(TIMEOUT)
        if not box:
            self.proc.kill()
            raise TimeoutError("client did not answer")
        return box[0].strip()

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._line()

    def close(self, quit: str = "q") -> None:
        if self.proc.poll() is not None:
            quit = ""
        try:
            if quit:
                self.ask(quit)
        except (OSError, TimeoutError, ValueError):
            pass
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass  # the process died with data in the pipe


class BarClient(LineClient):
    """A client process mapping one node (Python or C, same protocol)."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv, "size ")
        self.size = int(self.greeting.split()[1])

    def store(self, offset: int, data: bytes) -> None:
        assert self.ask(f"w {offset} {data.hex()}") == "ok"

    def load(self, offset: int, length: int) -> bytes:
        return bytes.fromhex(self.ask(f"r {offset} {length}"))


class PyClient(LineClient):
    """tests/integration/py_client.py: ipufs.client driven line by line."""

    def __init__(self, mountpoint: Path, ipu: int) -> None:
        script = Path(__file__).with_name("py_client.py")
        super().__init__([sys.executable, str(script), str(mountpoint), str(ipu)], "ready")

    def __call__(self, command: str) -> str:
        return self.ask(command)

    def signals(self, count: int, ms: int = 2000) -> list[tuple[int, int]]:
        """(signal, si_int) of the signals that came within ``ms``."""
        return [tuple(map(int, w.split(":"))) for w in self.ask(f"signals {count} {ms}").split()[1:]]  # type: ignore[misc]

    def close(self, quit: str = "quit") -> None:
        super().close(quit)


def daemon_process(mountpoint: Path, *options: str, log: IO[str] | None = None) -> subprocess.Popen[str]:
    """A real `ipufs mount` process, returned once it is ready: it told
    systemd's notify socket READY=1 (its /dev links and CDI spec made), as
    under the systemd unit. Its stderr is a pipe, or the file ``log``."""
    if not {"--cdi-dir", "--no-cdi"} & set(options):
        options += ("--no-cdi",)  # never the host's /var/run/cdi
    if "--uring" not in options:
        options += ("--uring", uring_option())
    with tempfile.TemporaryDirectory(prefix="ipufs-notify-") as tmp, \
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(os.path.join(tmp, "notify"))
        notify.settimeout(0.1)
        proc = subprocess.Popen(ipufs_command("mount", str(mountpoint), *options), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE if log is None else log, text=True,
                                env=dict(os.environ, NOTIFY_SOCKET=os.path.join(tmp, "notify")))

        def ready() -> bool:
            try:
                return b"READY=1" in notify.recv(4096)
            except (TimeoutError, BlockingIOError):
                return proc.poll() is not None  # it died: say so below

        if not wait_for(ready, MOUNT_TIMEOUT) or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"daemon did not mount: {proc.communicate()[1]}")
    return proc


def suspend(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP ``pid`` and return once every thread of it is stopped: the
    signal only starts the group stop, and a thread still running may take
    one more request meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:  # "pid (comm) S ...": the state follows the last ")"
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended meanwhile
        if all(state in "tT" for state in states):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not stop: thread states {states}")
        time.sleep(0.001)


def stop_processes(mountpoint: Path, *procs: subprocess.Popen[str] | subprocess.Popen[bytes] | None) -> None:
    """Kill what a test started and make sure no mount is left behind."""
    for p in procs:
        if p is not None:
            p.kill()
            p.communicate()
    if is_mounted(mountpoint):
        subprocess.run(["umount", "-l", str(mountpoint)])


def python_client(path: str) -> BarClient:
    return BarClient([sys.executable, str(Path(__file__).with_name("bar_client.py")), path])


def compile_c(source: Path, out_dir: Path) -> Path:
    """``source`` built as a tool writer would build it, against ipu.h and
    nothing else of ipufs: OUT_DIR/its stem."""
    binary = out_dir / source.stem
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native" / "include"),
                    "-o", str(binary), str(source)], check=True)
    return binary


def ipufs_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ipufs", *args]


def wait_for(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def is_mounted(mountpoint: Path | str) -> bool:
    return any(m.mountpoint == str(mountpoint) for m in fmount.mounts())


__all__ = ["ROOT", "os"]
