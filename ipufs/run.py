# `ipufs run [mount options] -- COMMAND [ARGS...]`: what umockdev-run is to
# umockdev. COMMAND runs with its own emulated IPUs: /dev/ipuN*, a
# /sys/bus/pci/devices holding only those IPUs, and the compatibility
# library preloaded, in a private mount namespace (docs/compat.md).
#
# This process supervises: it enters the namespace, starts `ipufs mount`
# there as a child, builds the view, runs COMMAND, and exits with COMMAND's
# status (128 + N for a signal). Every path cleans up: the daemon unmounts
# when COMMAND ends, is killed, or this process is stopped; a daemon that
# dies takes COMMAND down (125); processes COMMAND left behind are killed,
# so the namespace ends with it. As root the daemon uses passthrough; an
# unprivileged user gets a user namespace and the page-cache mode.
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ipufs import compat, native
from ipufs.fuse import mount as fmount
from ipufs.tools import namespace

#: Exit statuses of `ipufs run` itself, as env(1) and docker run use them.
FAILED, CANNOT_RUN, NOT_FOUND = 125, 126, 127
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class RunError(RuntimeError):
    """`ipufs run` could not give COMMAND its IPUs; the message says why."""


@dataclass
class RunOptions:
    command: list[str]
    mount_options: list[str] = field(default_factory=list)  # passed on to `ipufs mount`
    dev: Path | None = None  # an existing mount (or /dev-like directory) to use instead


def _say(message: str) -> None:
    print(f"ipufs run: {message}", file=sys.stderr, flush=True)


def _run_dir() -> Path:
    """A fresh directory for the mount point, control socket and daemon log.
    Ones left by a run whose supervisor was killed are cleared first."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    for old in base.glob("ipufs-run-*"):
        try:
            pid = int(old.name.split("-")[2])
            os.kill(pid, 0)
        except (ValueError, IndexError, PermissionError):
            continue
        except ProcessLookupError:
            _remove_run_dir(old)
    return Path(tempfile.mkdtemp(prefix=f"ipufs-run-{os.getpid()}-", dir=base))


def _remove_run_dir(path: Path) -> None:
    # Name by name, never recursively: a mount left there must not be walked.
    for name in ("daemon.log", "control.sock"):
        try:
            (path / name).unlink()
        except OSError:
            pass
    for name in ("mnt", "dev", ""):
        try:
            os.rmdir(path / name)
        except OSError:
            pass


def _child(deathsig: int, keep_sys_admin: bool = False) -> None:
    native.child_setup(deathsig, keep_sys_admin)


def _serving(mountpoint: Path, pid: int) -> bool:
    try:
        return os.getxattr(mountpoint, "user.ipufs.pid") == str(pid).encode()
    except OSError:
        return False


def _start_daemon(run_dir: Path, options: list[str], user: bool) -> subprocess.Popen[bytes]:
    """`ipufs mount` at RUN_DIR/mnt in this namespace, returned once it serves."""
    mountpoint = run_dir / "mnt"
    mountpoint.mkdir()
    argv = [sys.executable, "-m", "ipufs", "mount", str(mountpoint), "--no-link-dev", "--config", os.devnull,
            "--no-cdi", "--control", str(run_dir / "control.sock"), *options]
    if user:
        argv += ["--owner", str(os.geteuid()), "--group", str(os.getegid())]
    with open(run_dir / "daemon.log", "wb") as log:
        daemon = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                  preexec_fn=lambda: _child(signal.SIGTERM, keep_sys_admin=user))
    deadline = time.monotonic() + START_TIMEOUT
    while not _serving(mountpoint, daemon.pid):
        if daemon.poll() is not None or time.monotonic() > deadline:
            _stop(daemon, mountpoint)
            raise RunError("the daemon did not start: " + _tail(run_dir / "daemon.log"))
        time.sleep(0.02)
    return daemon


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return " / ".join(lines[-3:]) or "(no output)"


def _stop(daemon: subprocess.Popen[bytes] | None, mountpoint: Path | None) -> None:
    """Stop the daemon (it unmounts) and make sure nothing stays mounted."""
    if daemon is not None and daemon.poll() is None:
        daemon.terminate()
        try:
            daemon.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    if mountpoint is not None and any(m.mountpoint == str(mountpoint) for m in fmount.mounts()):
        try:
            fmount.abort(str(mountpoint))
        except OSError:
            fmount.unmount(str(mountpoint))


def _reap_leftovers() -> None:
    """Kill what COMMAND left running (this process is their subreaper), so
    that the namespace ends with this process."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            with open(f"/proc/self/task/{os.getpid()}/children") as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    time.sleep(0.01)
            except ChildProcessError:
                return


def _status(wait_status: int) -> int:
    return 128 + os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def _environment(library: Path, mountpoint: Path, control: str) -> dict[str, str]:
    env = compat.preload(dict(os.environ), library)
    env.update(IPUFS_MOUNT=str(mountpoint), IPUFS_CONTROL=control)
    env[compat.SYSFS_ENV] = compat.CONTAINER_SYSFS  # bound there: nothing to redirect
    return env


def _existing(dev: Path) -> tuple[Path, str, list[int]]:
    """The mount behind ``dev`` (a mount or a directory of links to one),
    its control socket and its IPUs."""
    from ipufs.tools.devices import indices, mountpoint_of

    found = indices(dev)
    if not found:
        raise RunError(f"{dev} holds no IPU nodes")
    mountpoint = Path(mountpoint_of(dev, found[0]))
    try:
        control = os.getxattr(mountpoint, "user.ipufs.control").decode()
    except OSError as exc:
        raise RunError(f"{mountpoint} is not a live ipufs mount: {exc.strerror}") from exc
    return mountpoint, control, found


def _service() -> Path | None:
    """For a user: the IPUs of an ipufs service they may open, served with
    passthrough, rather than a mount of their own in page-cache mode."""
    from ipufs.doctor import usable_service

    found = usable_service()
    if found is not None:
        _say(f"using the IPUs of the service at {found} (passthrough); "
             "give mount options, such as --ipus N, for IPUs of your own")
    return Path(found) if found is not None else None


def run(options: RunOptions) -> int:
    """Run the command; returns the status `ipufs run` exits with."""
    from ipufs.tools.devices import indices

    library = compat.library_path()
    user = os.geteuid() != 0
    dev = options.dev
    if dev is None and user and not options.mount_options:
        dev = _service()  # looked for as the user, before entering namespaces
    run_dir = _run_dir()
    daemon: subprocess.Popen[bytes] | None = None
    try:
        namespace.enter(user)
        native.become_subreaper()
        if dev is not None:
            mountpoint, control, found = _existing(dev)
            nodes = namespace.node_files(dev, found)
        else:
            daemon = _start_daemon(run_dir, options.mount_options, user)
            mountpoint, control = run_dir / "mnt", str(run_dir / "control.sock")
            nodes = namespace.node_files(mountpoint, indices(mountpoint))
        (run_dir / "dev").mkdir()
        namespace.build_dev(run_dir / "dev", nodes)
        namespace.bind_sysfs(compat.sysfs_view(mountpoint))
        return _supervise(options.command, _environment(library, mountpoint, control), daemon, run_dir)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES) and user:
            raise RunError(f"{exc} (`ipufs doctor` says what an unprivileged user may do here)") from exc
        raise
    finally:
        _stop(daemon, run_dir / "mnt" if daemon is not None else None)
        _reap_leftovers()
        _remove_run_dir(run_dir)


def _supervise(command: list[str], env: dict[str, str], daemon: subprocess.Popen[bytes] | None,
               run_dir: Path) -> int:
    """Run COMMAND; forward SIGTERM and SIGHUP to it (Ctrl-C reaches it from
    the terminal itself); end it when the daemon dies."""
    try:
        child = subprocess.Popen(command, env=env, preexec_fn=lambda: _child(signal.SIGKILL))
    except FileNotFoundError:
        _say(f"{command[0]}: command not found")
        return NOT_FOUND
    except PermissionError as exc:
        _say(f"{command[0]}: {exc.strerror}")
        return CANNOT_RUN

    def forward(signum: int, frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    previous |= {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    try:
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child.pid:
                child.returncode = _status(status)
                return child.returncode
            if daemon is not None and pid == daemon.pid:
                daemon.returncode = _status(status)
                _say(f"the daemon stopped (status {daemon.returncode}): {_tail(run_dir / 'daemon.log')}; "
                     f"stopping {command[0]}")
                child.terminate()
                try:
                    child.wait(2)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                return FAILED
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
