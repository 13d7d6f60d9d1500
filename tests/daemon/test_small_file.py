# A configuration file and a fault plan are regular files of at most 1 MiB
# (ipufs/daemon/small_file.py): /dev/zero was read until memory ran out
# (5 GB in 6 s), and a FIFO held `ipufs mount` at its start for good. Each
# is refused at once, in one line naming the file.
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from ipufs.daemon import config as cfg
from ipufs.daemon import small_file
from ipufs.daemon.config import DaemonConfig
from ipufs.daemon.daemon import Daemon
from ipufs.daemon.faults import FaultError
from tests.integration.harness import ipufs_command

pytestmark = pytest.mark.timeout(60)  # a refusal that reads or waits instead fails here


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "ipufs.toml"
    path.write_bytes(b"ipus = 2\n" * 1000)
    assert small_file.read(path) == path.read_bytes()
    path.write_bytes(b"x" * small_file.MAX_BYTES)
    assert len(small_file.read(path)) == small_file.MAX_BYTES


@pytest.mark.parametrize("name,kind", [("/dev/zero", "a character device"), ("/dev/null", "a character device"),
                                       ("/", "a directory")])
def test_what_is_not_a_regular_file_is_refused_unread(name: str, kind: str) -> None:
    with pytest.raises(small_file.FileRefused, match=f"^{name}: not a regular file \\({kind}\\)$"):
        small_file.read(name)


def test_a_fifo_is_refused_without_waiting_for_a_writer(fifo: Path) -> None:
    start = time.monotonic()
    with pytest.raises(small_file.FileRefused, match="not a regular file \\(a FIFO\\)"):
        small_file.read(fifo)
    assert time.monotonic() - start < 10


def test_a_socket_is_refused(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "sock"))
        with pytest.raises(small_file.FileRefused, match="not a regular file"):
            small_file.read(tmp_path / "sock")


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * (small_file.MAX_BYTES + 1))
    with pytest.raises(small_file.FileRefused, match="big.toml: larger than 1 MiB, the most it may hold"):
        small_file.read(path)
    # A file whose size says nothing (procfs: st_size 0) is bounded by what is read.
    assert small_file.read("/proc/self/stat", limit=4096)
    with pytest.raises(small_file.FileRefused, match="larger than 8 bytes"):
        small_file.read("/proc/self/stat", limit=8)


def test_a_missing_file_is_still_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        small_file.read(tmp_path / "none.toml")


def test_the_configuration_file(tmp_path: Path, fifo: Path) -> None:
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(ValueError, match=f"^{path}: not a regular file"):
            cfg.load(path)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"ipus = \xff\n")
    with pytest.raises(ValueError, match="binary.toml: not valid TOML: not UTF-8 text"):
        cfg.load(binary)


def test_the_fault_plan_a_mount_starts_with(tmp_path: Path, fifo: Path) -> None:
    for path in ("/dev/zero", str(fifo)):
        config = DaemonConfig(mountpoint=str(tmp_path / "mnt"), ipus=1, profile="ipu1", fault_plan=path,
                              control=str(tmp_path / "ctl"), link_dev=False, cdi_dir=None)
        with pytest.raises(FaultError, match=f"^fault plan {path}: not a regular file"):
            Daemon(config)


@pytest.mark.parametrize("argv", [["mount", "MNT", "--config", "/dev/zero"], ["mount", "MNT", "--config", "FIFO"],
                                  ["mount", "MNT", "--fault-plan", "/dev/zero", "--no-link-dev", "--no-cdi"],
                                  ["inject", "plan", "FIFO"]])
def test_the_commands_say_so_in_one_line(tmp_path: Path, fifo: Path, argv: list[str]) -> None:
    mnt = tmp_path / "mnt"
    argv = [str(mnt) if a == "MNT" else str(fifo) if a == "FIFO" else a for a in argv]
    out = subprocess.run(ipufs_command(*argv), capture_output=True, text=True, timeout=50)
    lines = out.stderr.strip().splitlines()
    assert out.returncode != 0 and len(lines) == 1 and "not a regular file" in lines[0], out.stderr
    assert not os.path.ismount(mnt)
