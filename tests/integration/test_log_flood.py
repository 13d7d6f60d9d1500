# A client looping on reset, attach and detach cannot flood the daemon's
# log: a real `ipufs mount` writes each kind's burst, then a summary line
# counting what it left out (docs/systemd.md).
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.client import Device
from ipufs.daemon.log_budget import BURST
from tests.integration.harness import daemon_process, stop_processes

pytestmark = pytest.mark.mount

ROUNDS = 1000


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A real `ipufs mount`; its log goes to tmp_path/daemon.log (a file:
    a flood into a pipe nobody reads would stop the daemon)."""
    mountpoint = tmp_path / "mnt"
    proc = None
    try:
        with open(tmp_path / "daemon.log", "w") as log:
            proc = daemon_process(mountpoint, "--ipus", "1", "--profile", "ipu1", "--no-link-dev", log=log)
        yield mountpoint, proc
    finally:
        stop_processes(mountpoint, proc)


def test_a_reset_and_attach_loop_is_summed_up(daemon: tuple[Path, subprocess.Popen[str]], tmp_path: Path) -> None:
    mountpoint, proc = daemon
    for _ in range(ROUNDS):
        with Device(0, mountpoint) as dev:  # attach, reset, and detach at close
            dev.attach()
            dev.reset()
    proc.terminate()
    proc.wait(timeout=30)
    stderr = (tmp_path / "daemon.log").read_text()
    lines = stderr.splitlines()
    for word in ("IPU 0 reset", "IPU 0 attached", "IPU 0 detached"):
        told = [line for line in lines if line.startswith(f"ipufs: INFO: {word}")]
        summaries = [line for line in lines if "suppressed" in line and f"the last: {word}" in line]
        assert BURST <= len(told) < BURST + 60, (word, len(told))  # the burst, then at most one a second
        assert summaries, f"no summary of the {word} lines"
        counted = sum(int(line.split("INFO: ")[1].split()[0]) for line in summaries)
        assert counted + len(told) == ROUNDS, word  # every line written or counted
    assert "Traceback" not in stderr
