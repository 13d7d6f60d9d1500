# .ci/cleanup, the CI run's exit trap: it ends the ipufs mounts of the run's
# own directory, even one whose daemon hangs, and touches no other mount on
# the machine, however close its path.
from __future__ import annotations

import os
import signal
import subprocess
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
