# When the daemon dies (its mount answers ENOTCONN) or is stopped (SIGSTOP:
# its socket accepts and nothing answers, its nodes' reads wait in the
# kernel), the monitoring tools say so and return: gcipuinfo's
# updateData() answers False and its constructor does not raise, the
# exporters answer 200 with `ipufs_up 0`, and a control request times out
# with a message that says what happened.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.client import Control, ControlTimeout
from tests.integration.harness import daemon_process, stop_processes, suspend
from tests.monitoring.conftest import ExporterProcess, consumer_env
from tests.monitoring.test_exporter import scrape

pytestmark = pytest.mark.mount

GCIPUINFO = """
import time, gcipuinfo
began = time.monotonic()
info = gcipuinfo.gcipuinfo()          # reads once: must not raise
updated = info.updateData()
print(updated, info.getDevices() == [] or updated, round(time.monotonic() - began))
print(info.checkHealthOfDevices())
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    proc = daemon_process(mountpoint, "--ipus", "2", "--no-link-dev")
    try:
        yield mountpoint, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        stop_processes(mountpoint, proc)


def _gcipuinfo(mountpoint: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-c", GCIPUINFO], env=consumer_env(mountpoint), capture_output=True,
                         text=True, timeout=60, cwd="/")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return out.stdout.splitlines()


def test_after_the_daemon_dies(daemon: tuple[Path, subprocess.Popen[str]]) -> None:
    mountpoint, proc = daemon
    e = ExporterProcess(mountpoint)
    try:
        assert scrape(e)[("ipufs_up", frozenset())] == 1
        proc.kill()
        proc.wait(10)
        with pytest.raises(OSError):
            os.listdir(mountpoint)  # ENOTCONN: the mount is there, its daemon is not
        samples = scrape(e)  # 200, not 500
        assert samples[("ipufs_up", frozenset())] == 0
        assert samples[("ipufs_exporter_scrape_errors_total", frozenset({("reason", "daemon_gone")}))] == 1
        updated, _, _ = _gcipuinfo(mountpoint)[0].split()
        health = _gcipuinfo(mountpoint)[1]
        assert updated == "False"
        assert health.startswith("health check failed: ") and health.endswith("the daemon is gone")
    finally:
        e.close()


@pytest.mark.timeout(120)
def test_while_the_daemon_is_stopped(daemon: tuple[Path, subprocess.Popen[str]]) -> None:
    mountpoint, proc = daemon
    e = ExporterProcess(mountpoint)
    try:
        suspend(proc.pid)
        began = time.monotonic()
        samples = scrape(e)  # the daemon is asked first, within 2 s; its nodes are never touched
        assert time.monotonic() - began < 15
        assert samples[("ipufs_up", frozenset())] == 0
        assert samples[("ipufs_exporter_scrape_errors_total", frozenset({("reason", "daemon_timeout")}))] == 1
        first, health = _gcipuinfo(mountpoint)
        updated, _, seconds = first.split()
        assert updated == "False" and int(seconds) <= 20
        assert health.startswith("health check failed: the daemon did not answer 'status' within 5 s")
        os.kill(proc.pid, signal.SIGCONT)
        assert scrape(e)[("ipufs_up", frozenset())] == 1  # and back
    finally:
        e.close()


def test_a_control_request_to_a_stopped_daemon_times_out(daemon: tuple[Path, subprocess.Popen[str]]) -> None:
    mountpoint, proc = daemon
    control = Control.of_mount(mountpoint, timeout=1)  # before: xattrs are answered by the daemon too
    try:
        suspend(proc.pid)
        began = time.monotonic()
        with pytest.raises(ControlTimeout, match=r"did not answer 'status' within 1 s on .*: it is stopped"):
            control.request("status")
        assert time.monotonic() - began < 10
    finally:
        control.close()
