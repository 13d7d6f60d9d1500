# Fixtures for the device plugin's tests: a node of two M2000 boards (8
# ipu2 IPUs), a test kubelet on a socket directory of its own, and
# `ipufs device-plugin` run as a user runs it, in a process of its own.
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # gRPC's own INFO lines are noise here
pytest.importorskip("grpc", reason="the device plugin's tests need the kubernetes extra (./dev setup installs it)")

from tests.deviceplugin.kubelet import TestKubelet  # noqa: E402
from tests.integration.harness import RunningDaemon, ipufs_command, running_daemon  # noqa: E402

Plugin = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RunningDaemon]:
    """Two M2000 boards: ipu0..3 and ipu4..7."""
    with running_daemon(tmp_path / "mnt", ipus=8, profile="ipu2") as d:
        yield d


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Short: a Unix socket's path must fit in 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(socket_dir: Path) -> Iterator[TestKubelet]:
    k = TestKubelet(socket_dir)
    k.start()
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture
def plugin(socket_dir: Path, tmp_path: Path) -> Iterator[Plugin]:
    """Starts `ipufs device-plugin --socket-dir SOCKET_DIR ARGS...`; stops
    each (SIGTERM, then SIGKILL) when the test ends."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        log = open(tmp_path / f"plugin{len(started)}.log", "w")
        proc = subprocess.Popen(ipufs_command("device-plugin", "--socket-dir", str(socket_dir), *args),
                                stdout=log, stderr=subprocess.STDOUT, text=True)
        log.close()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for name in sorted(os.listdir(tmp_path)):
        if name.startswith("plugin") and name.endswith(".log"):
            print(f"--- {name}\n{(tmp_path / name).read_text()}")
