# A mounted M2000 board for the monitoring tests, with a process attached to
# IPU 1 as a Poplar program would be, and helpers to run consumers of the
# gcipuinfo API in their own processes.
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipufs.monitoring.paths import module_dir
from tests.integration.harness import ROOT, PyClient, RunningDaemon, ipufs_command, running_daemon



@pytest.fixture
def board(tmp_path: Path) -> Iterator[RunningDaemon]:
    """Four ipu2 IPUs (one IPU-Machine)."""
    with running_daemon(tmp_path / "mnt", ipus=4, profile="ipu2") as d:
        yield d


@pytest.fixture
def attached(board: RunningDaemon) -> Iterator[PyClient]:
    """A process attached to IPU 1."""
    client = PyClient(board.mountpoint, 1)
    try:
        assert client("attach") == "ok"
        yield client
    finally:
        client.close()


def consumer_env(mountpoint: Path, *extra_path: str) -> dict[str, str]:
    """A consumer's environment: `import gcipuinfo` finds ipufs's module
    (what `ipufs run` gives a command), the nodes are the mount's."""
    path = [*extra_path, str(module_dir())]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), IPUFS_DEV=str(mountpoint))


def run_consumer(script: str, env: dict[str, str], timeout: float = 60) -> str:
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def ipufs(*args: str) -> str:
    out = subprocess.run(ipufs_command(*args), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def device_info(text: str) -> list[dict[str, str]]:
    """`ipufs info`'s devices, key -> value."""
    found: list[dict[str, str]] = []
    for line in text.splitlines():
        if line == "Device Info:":
            found.append({})
        else:
            key, value = line[2:].split(": ", 1)
            found[-1][key] = value
    return found


class ExporterProcess:
    """`ipufs exporter` serving a mount on a loopback port of its choosing;
    each scrape reads the IPUs afresh (--cache 0) unless ``options`` say
    otherwise."""

    def __init__(self, mountpoint: Path, *options: str, **popen: Any) -> None:
        options = options if "--cache" in options else ("--cache", "0", *options)
        self.proc = subprocess.Popen(ipufs_command("exporter", "--dev", str(mountpoint), "--listen", "127.0.0.1:0",
                                                   *options),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "... on http://127.0.0.1:PORT/metrics"
        if "://" not in line:
            self.proc.terminate()
            _, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"exporter did not start: {line} {err}")
        self.url = line.split()[-1].removesuffix("/metrics")  # http://... or https://...
        self.port = int(self.url.rsplit(":", 1)[1])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def exporter(board: RunningDaemon) -> Iterator[ExporterProcess]:
    e = ExporterProcess(board.mountpoint)
    try:
        yield e
    finally:
        e.close()
