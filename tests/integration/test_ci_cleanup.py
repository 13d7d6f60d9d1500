# .ci/cleanup, the CI run's exit trap: it ends the ipufs mounts of the run's
# own directory, even one whose daemon hangs, and touches no other mount on
# the machine, however close its path.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, TIMEOUT, daemon_process, is_mounted, stop_processes

pytestmark = pytest.mark.mount

CLEANUP = ROOT / ".ci" / "cleanup"


def test_cleanup_ends_the_runs_mounts_and_leaves_foreign_ones(tmp_path: Path) -> None:
    run_dir = tmp_path / "ci-run"
    points = {
        "ours": run_dir / "pytest-of-root" / "mnt",
        "hung": run_dir / "hung mnt",  # mountinfo escapes the space
        "foreign": tmp_path / "elsewhere" / "mnt",
        "neighbour": tmp_path / "ci-run-2" / "mnt",  # shares the run directory's name as a prefix
    }
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, point in points.items():
            point.mkdir(parents=True)
            procs[name] = daemon_process(point, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
        os.kill(procs["hung"].pid, signal.SIGSTOP)  # a daemon that no longer answers
        done = subprocess.run([str(CLEANUP), str(run_dir)], capture_output=True, text=True, timeout=TIMEOUT * 3)
        assert done.returncode == 0, done.stderr
        assert not is_mounted(points["ours"]) and not is_mounted(points["hung"])
        assert not run_dir.exists()
        for name in ("foreign", "neighbour"):
            assert is_mounted(points[name]), name
            assert (points[name] / "ipu0").stat().st_size > 0  # still served
            assert procs[name].poll() is None
    finally:
        for name, point in points.items():
            stop_processes(point, procs.get(name))  # SIGKILL ends a stopped daemon too


def test_cleanup_of_a_directory_that_is_gone_does_nothing(tmp_path: Path) -> None:
    done = subprocess.run([str(CLEANUP), str(tmp_path / "never-made")], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0 and done.stderr == ""


STUB_DEV = """#!/usr/bin/env bash
# Stands in for ./dev: `./dev test` leaves a mount of its own behind in
# TMPDIR, its daemon still running, and fails.
set -u
[ "$1" = test ] && [ -n "${TMPDIR:-}" ] || exit 2  # never a mount outside the run's directory
mkdir "$TMPDIR/mnt" || exit 2
"$PYTHON" -m ipufs mount "$TMPDIR/mnt" --ipus 1 --profile ipu1 --no-cdi --no-link-dev >/dev/null 2>&1 &
echo "$! $TMPDIR" > "$REPORT"
for _ in $(seq 100); do
    grep -q " $TMPDIR/mnt " /proc/self/mountinfo && exit 3
    sleep 0.1
done
exit 4
"""


def stub_checkout(where: Path) -> Path:
    """A checkout holding this .ci/ and STUB_DEV as its ./dev."""
    (where / ".ci").mkdir(parents=True)
    for name in ("run", "cleanup"):
        (where / ".ci" / name).write_bytes((ROOT / ".ci" / name).read_bytes())
        (where / ".ci" / name).chmod(0o755)
    (where / "dev").write_text(STUB_DEV)
    (where / "dev").chmod(0o755)
    return where


def run_ci(checkout: Path, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(checkout / ".ci" / "run")], capture_output=True, text=True, timeout=TIMEOUT * 6,
                          env={**os.environ, "PYTHON": sys.executable, "REPORT": str(report)})


def started(pid: int) -> str:
    """Field 22 of /proc/PID/stat, as .ci/run records it."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[19]


def test_ci_run_ends_its_own_leftover_mount_and_no_other(tmp_path: Path) -> None:
    """.ci/run itself, around a stand-in for `./dev test` that leaves its
    mount and daemon behind: the run's status is the test's, its mount and
    directory are gone, and a mount of someone else stays."""
    checkout = stub_checkout(tmp_path / "checkout")
    report = tmp_path / "report"
    foreign_point = tmp_path / "foreign"
    foreign_point.mkdir()
    foreign = daemon_process(foreign_point, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    leaked: list[str] = []
    try:
        done = run_ci(checkout, report)
        leaked = report.read_text().split()
        assert done.returncode == 3, done.stderr  # the stand-in's own status
        pid, run_dir = int(leaked[0]), leaked[1]
        assert run_dir.startswith("/tmp/ci-")
        assert not is_mounted(f"{run_dir}/mnt") and not os.path.exists(run_dir)
        assert f"ci: aborting leftover mount {run_dir}/mnt" in done.stderr
        assert is_mounted(foreign_point) and foreign.poll() is None
        assert (foreign_point / "ipu0").stat().st_size > 0
    finally:
        if leaked:
            try:
                os.kill(int(leaked[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
            stop_processes(Path(leaked[1]) / "mnt")
        stop_processes(foreign_point, foreign)


def test_ci_run_ends_what_a_killed_run_left_and_nothing_else(tmp_path: Path) -> None:
    """A run killed before its trap left its directory and mount: the next
    run ends them. A run still going, and a link named like a run directory
    (pointing at a directory to be emptied), are left alone."""
    dead = Path(tempfile.mkdtemp(prefix="ci-", dir="/tmp"))
    alive = Path(tempfile.mkdtemp(prefix="ci-", dir="/tmp"))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep")
    (victim / ".ci-run").write_text("999999999 1\n")  # a run long gone, as a link would show it
    link = Path(tempfile.mktemp(prefix="ci-", dir="/tmp"))
    link.symlink_to(victim)
    (dead / ".ci-run").write_text("999999999 1\n")
    (alive / ".ci-run").write_text(f"{os.getpid()} {started(os.getpid())}\n")
    procs: dict[Path, subprocess.Popen[str]] = {}
    try:
        for where in (dead, alive):
            (where / "mnt").mkdir()
            procs[where] = daemon_process(where / "mnt", "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
        done = run_ci(stub_checkout(tmp_path / "checkout"), tmp_path / "report")
        assert done.returncode == 3, done.stderr
        assert f"ci: ending what a killed run left in {dead}" in done.stderr
        assert not is_mounted(dead / "mnt") and not dead.exists()
        assert is_mounted(alive / "mnt") and (alive / "mnt" / "ipu0").stat().st_size > 0
        assert (victim / "precious").read_text() == "keep" and link.is_symlink()
    finally:
        for where, proc in procs.items():
            stop_processes(where / "mnt", proc)
        subprocess.run(["rm", "-rf", "--one-file-system", str(dead), str(alive)])
        link.unlink(missing_ok=True)
        leaked = (tmp_path / "report").read_text().split() if (tmp_path / "report").exists() else []
        if leaked:
            try:
                os.kill(int(leaked[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
