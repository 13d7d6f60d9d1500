# `ipufs run` as a user runs it: exit status, environment, the private
# /dev and /sys, reusing a mount with --dev, and cleanup on every path
# (COMMAND killed, the daemon killed, a signal to ipufs run): nothing left
# mounted, no process left in the namespace, the host's /dev untouched.
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ipufs import compat
from tests.integration.compat_harness import Run
from tests.integration.harness import is_mounted, running_daemon, wait_for

pytestmark = pytest.mark.mount

REPORT = ('echo "$$"; echo "$IPUFS_MOUNT"; echo "$IPUFS_CONTROL"; echo "$LD_PRELOAD"; '
          'readlink /proc/self/ns/mnt; ')


def in_namespace(ns: str) -> list[int]:
    """Processes still in mount namespace ``ns``. Once a namespace is gone
    its number is used again, by the next one made anywhere: a test that
    looks for processes by namespace after its run may end is marked
    `alone`, so that no other test's run can be made meanwhile."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == ns:
                found.append(int(pid))
        except OSError:
            pass
    return found


def host_dev() -> list[str]:
    return sorted(os.listdir("/dev"))


def outer_pid(ns: str, inner: int) -> int:
    """The PID (in ours) of the process of mount namespace ``ns`` whose
    PID in its own PID namespace is ``inner``."""
    for pid in in_namespace(ns):
        try:
            with open(f"/proc/{pid}/status") as f:
                nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if int(nspid[-1]) == inner:
            return pid
    raise AssertionError(f"no process {inner} in {ns}")


def started(run: Run) -> tuple[int, Path, str, str, str]:
    """COMMAND's PID (in its PID namespace), mount, control socket,
    LD_PRELOAD and mount namespace, as REPORT prints them."""
    pid, mount, control, preload, ns = (run.line() for _ in range(5))
    return int(pid), Path(mount), control, preload, ns


def assert_clean(run_dir: Path, ns: str) -> None:
    assert wait_for(lambda: not in_namespace(ns), 5), in_namespace(ns)
    assert not is_mounted(run_dir / "mnt")
    assert not run_dir.exists()


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_exit_status_and_environment() -> None:
    before = host_dev()
    run = Run(["--ipus", "2"], ["sh", "-c", REPORT + "ls /dev/ | grep ^ipu | tr '\\n' ' '; echo; "
                                "ls /sys/bus/pci/devices | tr '\\n' ' '; echo; test -c /dev/null && echo null; "
                                "ls -d /dev/pts /dev/shm; exit 7"])
    try:
        pid, mount, control, preload, ns = started(run)
        assert ns != os.readlink("/proc/self/ns/mnt")
        assert mount.name == "mnt" and control == str(mount.parent / "control.sock")
        assert preload.split()[0] == str(compat.library_path())
        assert run.line().split() == [f"ipu{n}{s}" for n in range(2) for s in ("", "_ex", "_mailbox", "_mem")]
        assert run.line().split() == ["0000:1a:00.0", "0000:1b:00.0"]
        assert [run.line() for _ in range(3)] == ["null", "/dev/pts", "/dev/shm"]
        status, err = run.finish()
        assert status == 7, err
        assert_clean(mount.parent, ns)
        assert host_dev() == before
    finally:
        run.close()


@pytest.mark.parametrize("command,status", [
    (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM),
    (["sh", "-c", "exit 0"], 0),
    (["/nonexistent/command"], 127),
])
def test_statuses(command: list[str], status: int) -> None:
    run = Run(["--ipus", "1"], command)
    got, err = run.finish()
    assert got == status, err


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_kill_9_of_the_command() -> None:
    run = Run(["--ipus", "1"], ["sh", "-c", REPORT + "sleep 60 & echo ready; wait"])
    try:
        pid, mount, _, _, ns = started(run)
        assert run.line() == "ready"
        os.kill(outer_pid(ns, pid), signal.SIGKILL)
        status, err = run.finish()
        assert status == 128 + signal.SIGKILL, err
        assert_clean(mount.parent, ns)  # the backgrounded sleep went too
    finally:
        run.close()


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_kill_9_of_the_daemon() -> None:
    run = Run(["--ipus", "1"], ["sh", "-c", REPORT + "getfattr --only-values -n user.ipufs.pid \"$IPUFS_MOUNT\" "
                                "2>/dev/null || python3 -c 'import os; print(os.getxattr(os.environ[\"IPUFS_MOUNT\"], "
                                "\"user.ipufs.pid\").decode())'; echo; exec sleep 60"])
    try:
        _, mount, _, _, ns = started(run)
        daemon = int(run.line())
        os.kill(daemon, signal.SIGKILL)
        status, err = run.finish()
        assert status == 125 and "the daemon stopped" in err, err
        assert_clean(mount.parent, ns)
    finally:
        run.close()


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_sigterm_to_ipufs_run_reaches_the_command() -> None:
    run = Run(["--ipus", "1"], ["sh", "-c", REPORT + "trap 'echo got TERM; exit 3' TERM; echo ready; "
                                "while :; do sleep 0.05; done"])
    try:
        _, mount, _, _, ns = started(run)
        assert run.line() == "ready"
        run.proc.send_signal(signal.SIGTERM)
        assert run.line() == "got TERM"
        status, err = run.finish()
        assert status == 3, err
        assert_clean(mount.parent, ns)
    finally:
        run.close()


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_dev_reuses_an_existing_mount(tmp_path: Path) -> None:
    with running_daemon(tmp_path / "mnt", ipus=2, profile="ipu1") as d:
        run = Run(["--dev", str(d.mountpoint)], ["sh", "-c", REPORT + "ls /sys/bus/pci/devices | tr '\\n' ' '; "
                                                 "echo; test -c /dev/ipu1_ex && echo chr"])
        try:
            _, mount, control, _, ns = started(run)
            assert mount == d.mountpoint and control == str(d.mountpoint) + ".ctl"
            assert run.line().split() == ["0000:1a:00.0", "0000:1b:00.0"]
            assert run.line() == "chr"
            status, err = run.finish()
            assert status == 0, err
            assert wait_for(lambda: not in_namespace(ns), 5)
        finally:
            run.close()
        assert is_mounted(d.mountpoint)  # someone else's mount is left as it was


def test_the_command_is_pid_2_of_its_own_pid_namespace_with_its_own_proc() -> None:
    run = Run(["--ipus", "1"], ["sh", "-c", "echo $$; cat /proc/$$/comm; cat /proc/1/cmdline | tr '\\0' ' '; echo"])
    try:
        assert run.line() == "2"
        assert run.line() == "sh"  # /proc is the namespace's: PID 2 there is COMMAND
        assert "ipufs" in run.line()  # PID 1: the init of `ipufs run`
        status, err = run.finish()
        assert status == 0, err
    finally:
        run.close()
