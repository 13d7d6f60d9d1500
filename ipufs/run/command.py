# `ipufs run [mount options] -- COMMAND [ARGS...]`: what umockdev-run is to
# umockdev. COMMAND runs with its own emulated IPUs: /dev/ipuN*, a /sys
# whose PCI bus holds only those IPUs (with their class devices and device
# numbers), udev's database entries for them in /run/udev/data, and the
# compatibility library preloaded, in a private mount namespace
# (docs/compat.md).
#
# This process supervises: it enters the namespace, starts `ipufs mount`
# there as a child (this installation's, self_command.py), builds the view,
# runs COMMAND in a PID namespace of its own (tools/pidns.py), and exits
# with COMMAND's status (128 + N for a signal). Every path cleans up: the
# daemon unmounts when COMMAND ends, is killed, or this process is stopped
# (even by SIGKILL: death signals); a daemon that dies takes COMMAND down
# (125); every process COMMAND started ends with its PID namespace; the
# working directory is removed, or by the next run if this one was killed
# (tools/run_dir.py). As root the daemon uses passthrough; an unprivileged
# user gets a user namespace and the page-cache mode.
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ipufs import compat, native, self_command
from ipufs.fuse import mount as fmount
from ipufs.monitoring.paths import module_dir
from ipufs.run import namespace, pci_names, pidns
from ipufs.run import run_dir as working
from ipufs.run.grafts import Grafts

#: Exit statuses of `ipufs run` itself, as env(1) and docker run use them.
FAILED, CANNOT_RUN, NOT_FOUND = pidns.FAILED, pidns.CANNOT_RUN, pidns.NOT_FOUND
START_TIMEOUT = 60.0  # a daemon starting on a loaded machine: the wait polls, and ends when it serves
STOP_TIMEOUT = 10.0
STOP_GRACE = 2.0  # between SIGTERM and SIGKILL of COMMAND when the daemon died


class RunError(RuntimeError):
    """`ipufs run` could not give COMMAND its IPUs; the message says why."""


@dataclass
class RunOptions:
    command: list[str]
    mount_options: list[str] = field(default_factory=list)  # passed on to `ipufs mount`
    dev: Path | None = None  # an existing mount (or /dev-like directory) to use instead


def _say(message: str) -> None:
    print(f"ipufs run: {message}", file=sys.stderr, flush=True)


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
    argv = self_command.argv("mount", str(mountpoint), "--no-link-dev", "--config", "",
                             "--no-cdi", "--control", str(run_dir / "control.sock"), *options)
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
    """Kill what the daemon left running (this process is the subreaper
    of everything it started; COMMAND's processes end with their PID
    namespace), so that the mount namespace ends with this process."""
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


def _environment(library: Path, mountpoint: Path, control: str) -> dict[str, str]:
    env = compat.preload(dict(os.environ), library)
    env.update(IPUFS_MOUNT=str(mountpoint), IPUFS_CONTROL=control)
    env[compat.SYSFS_ENV] = compat.CONTAINER_SYSFS  # bound there: nothing to redirect
    # `import gcipuinfo` finds ipufs's (a real one elsewhere still wins:
    # docs/monitoring.md, "Finding the module").
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(module_dir())) if p)
    env.update(compat.UDEV_ENVIRONMENT)
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
    from ipufs.run.services import usable_service

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
    try:
        run_dir = working.create()
    except working.RunDirError as exc:
        raise RunError(exc.strerror) from exc
    daemon: subprocess.Popen[bytes] | None = None
    try:
        namespace.enter(user)
        native.become_subreaper()
        (run_dir / "stage").mkdir()
        grafts = Grafts(run_dir / "stage")
        # Before the daemon mounts: the run directory may lie under /run,
        # and a mount there must be made where the command will see it.
        grafts.writable(namespace.UDEV_DATA)
        if dev is not None:
            mountpoint, control, found = _existing(dev)
            nodes = namespace.node_files(dev, found)
        else:
            daemon = _start_daemon(run_dir, options.mount_options, user)
            mountpoint, control = run_dir / "mnt", str(run_dir / "control.sock")
            nodes = namespace.node_files(mountpoint, indices(mountpoint))
        (run_dir / "dev").mkdir()
        namespace.build_dev(run_dir / "dev", nodes)
        view = compat.sysfs_root(mountpoint)
        namespace.show_sysfs(view, grafts)
        pci_names.show(view, grafts)
        namespace.write_udev_data(namespace.udev_entries(view), grafts)
        return _supervise(options.command, _environment(library, mountpoint, control), daemon, run_dir)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES) and user:
            raise RunError(f"{exc} (`ipufs doctor` says what an unprivileged user may do here)") from exc
        raise
    finally:
        _stop(daemon, run_dir / "mnt" if daemon is not None else None)
        _reap_leftovers()
        working.remove(run_dir)


def _supervise(command: list[str], env: dict[str, str], daemon: subprocess.Popen[bytes] | None,
               run_dir: Path) -> int:
    """Run COMMAND in its PID namespace; forward SIGTERM and SIGHUP to it
    (its init passes them on; Ctrl-C reaches it from the terminal itself);
    end it when the daemon dies."""
    init, alive = pidns.start(command, env)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(init, signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    previous |= {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    try:
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == init:
                return pidns.status_of(status)
            if daemon is not None and pid == daemon.pid:
                daemon.returncode = pidns.status_of(status)
                _say(f"the daemon stopped (status {daemon.returncode}): {_tail(run_dir / 'daemon.log')}; "
                     f"stopping {command[0]}")
                _end(init)
                return FAILED
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(alive)


def _end(init: int) -> None:
    """SIGTERM to COMMAND (through its init), SIGKILL to the namespace
    after STOP_GRACE seconds."""
    os.kill(init, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        if os.waitpid(init, os.WNOHANG)[0] == init:
            return
        time.sleep(0.02)
    os.kill(init, signal.SIGKILL)
    os.waitpid(init, 0)
