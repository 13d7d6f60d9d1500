# `ipufs run` ends everything it started and removes what it made, on every
# path: a command whose processes keep forking, a grandchild left running
# when `ipufs run` itself is killed with SIGKILL (then the next run removes
# the working directory), and its cleanup of old working directories in a
# shared directory never follows another user's link. An unusable
# XDG_RUNTIME_DIR, like any failure of `ipufs run` itself, is 125.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.compat_harness import NOBODY, Run
from tests.integration.harness import wait_for
from tests.integration.test_run import REPORT, in_namespace, started

pytestmark = pytest.mark.mount
TIMEOUT = 60


def kill_all(ns: str) -> None:
    """SIGKILL every process of mount namespace ``ns`` until none is left
    (what a test leaves, whatever the code under test did)."""
    for _ in range(100):
        pids = in_namespace(ns)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def mentioning(text: str) -> list[int]:
    """Processes whose command line holds ``text``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@contextmanager
def scratch(mode: int) -> Iterator[Path]:
    """A new directory in /tmp (short: a control socket's path in it must
    fit in a sockaddr_un), removed with what it holds afterwards."""
    where = Path(tempfile.mkdtemp(prefix="ipufs-rt-", dir="/tmp"))
    where.chmod(mode)
    try:
        yield where
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(where)], check=True)


@pytest.fixture(autouse=True)
def private_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Working directories of these runs in a directory of their own, out
    of reach of other runs' cleanup."""
    with scratch(0o700) as where:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(where))
        yield


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_a_command_whose_processes_keep_forking_leaves_nothing() -> None:
    # A subshell that ignores SIGTERM keeps making orphans (a subshell that
    # starts a sleep and exits) as fast as it can, up to 30000 of them,
    # while COMMAND itself ends at once.
    keeps_forking = "(trap '' TERM; i=0; while [ $i -lt 30000 ]; do (sleep 120 &); i=$((i+1)); done) >/dev/null 2>&1 &"
    run = Run(["--ipus", "1"], ["sh", "-c", REPORT + keeps_forking + " echo ready; sleep 0.3"])
    ns = ""
    try:
        _, mount, _, _, ns = started(run)
        assert run.line() == "ready"
        status, err = run.finish()
        assert status == 0, err
        assert wait_for(lambda: not in_namespace(ns), 5), f"left running: {in_namespace(ns)}"
        assert not mount.parent.exists()
    finally:
        run.close()
        if ns:
            kill_all(ns)


@pytest.mark.alone  # looks processes up by mount namespace (in_namespace)
def test_sigkill_of_ipufs_run_ends_everything_and_the_next_run_removes_its_directory() -> None:
    run = Run(["--ipus", "1"], ["sh", "-c", REPORT + "sh -c 'sleep 60 & wait' & echo ready; wait"])
    ns = ""
    try:
        _, mount, _, _, ns = started(run)
        run_dir = mount.parent
        assert run.line() == "ready"
        run.proc.kill()
        run.proc.wait()  # (not its pipes: what survived would hold them)
        assert wait_for(lambda: not in_namespace(ns), 5), f"left running: {in_namespace(ns)}"
        assert wait_for(lambda: not mentioning(str(run_dir)), 10), f"the daemon stayed: {mentioning(str(run_dir))}"
        assert run_dir.exists()  # nothing can remove it as the supervisor is killed
        again = Run(["--ipus", "1"], ["true"])
        status, err = again.finish()
        assert status == 0, err
        assert not run_dir.exists()
    finally:
        run.close()
        if ns:
            kill_all(ns)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory like /tmp (mode 1777), that user nobody can reach."""
    with scratch(0o1777) as where:
        yield where


def as_nobody(*argv: str) -> None:
    subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv], check=True)


def run_in(base: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ipufs", "run", "--ipus", "1", "--", *command],
                          env=dict(os.environ, XDG_RUNTIME_DIR=str(base)), capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def test_cleanup_never_follows_another_users_link(shared_tmp: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    for sub in ("mnt", "dev", "keep"):
        (victim / sub).mkdir(parents=True)
    for name in ("daemon.log", "control.sock", "keep/data"):
        (victim / name).write_text("precious\n")
    dead = 2 ** 22 + 1  # above any pid_max: no such process
    as_nobody("ln", "-s", str(victim), str(shared_tmp / f"ipufs-run-{dead}-link"))
    as_nobody("mkdir", str(shared_tmp / f"ipufs-run-{dead}-theirs"))
    # A stale directory of our own, holding a link to the victim too.
    ours = shared_tmp / f"ipufs-run-{dead}-ours"
    (ours / "dev").mkdir(parents=True)
    (ours / "daemon.log").write_text("old\n")
    (ours / "dev" / "into-victim").symlink_to(victim)
    (ours / "mnt").symlink_to(victim)

    out = run_in(shared_tmp, "true")
    assert out.returncode == 0, out.stderr
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == [
        "control.sock", "daemon.log", "dev", "keep", "keep/data", "mnt"]
    assert (victim / "keep" / "data").read_text() == "precious\n"
    assert sorted(p.name for p in shared_tmp.iterdir()) == [f"ipufs-run-{dead}-link", f"ipufs-run-{dead}-theirs"]


@pytest.mark.parametrize("runtime_dir", ["/nonexistent/run", "/proc/version"])
def test_an_unusable_runtime_dir_is_a_failure_of_ipufs_run(runtime_dir: str) -> None:
    out = run_in(Path(runtime_dir), "true")
    assert out.returncode == 125, out
    assert out.stderr.startswith(f"ipufs run: cannot make a working directory in {runtime_dir} ($XDG_RUNTIME_DIR)")
    assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_dev_without_ipus_is_a_failure_of_ipufs_run() -> None:
    out = subprocess.run([sys.executable, "-m", "ipufs", "run", "--dev", "/nonexistent", "--", "true"],
                         capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert out.returncode == 125, out  # not 1, which COMMAND could have said
    assert out.stderr.startswith("ipufs run: no IPUs in /nonexistent (it does not exist)")
    assert len(out.stderr.splitlines()) == 1


def test_cleanup_never_walks_into_a_mount(tmp_path: Path) -> None:
    """A bind of another directory of the same filesystem inside a stale
    working directory (same st_dev) is left with what it holds."""
    victim, base = tmp_path / "victim", tmp_path / "base"
    victim.mkdir()
    (victim / "data").write_text("precious\n")
    stale = base / f"ipufs-run-{2 ** 22 + 1}-x"
    (stale / "mnt").mkdir(parents=True)
    (stale / "daemon.log").write_text("old\n")
    script = ("mount --bind \"$1\" \"$2\" && exec \"$3\" -c 'import sys; from ipufs.run import run_dir; "
              "run_dir.clear_stale(sys.argv[1]); import os; print(sorted(os.listdir(sys.argv[2])))' \"$4\" \"$2\"")
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                          str(victim), str(stale / "mnt"), sys.executable, str(base)],
                         capture_output=True, text=True, timeout=TIMEOUT)  # the bind ends with the namespace
    assert out.returncode == 0, out.stderr
    assert out.stdout == "['data']\n"  # still bound, still holding the data
    assert (victim / "data").read_text() == "precious\n"
    assert sorted(p.name for p in stale.iterdir()) == ["mnt"]  # the rest went
