# A daemon that fails while it is being built gives back what it held: the
# state directory's lock, the memfds behind the BARs, the trace file.
from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from ipufs.abi import ioctls as abi
from ipufs.daemon.config import DaemonConfig
from ipufs.daemon.daemon import Daemon
from ipufs.daemon.faults import FaultError
from ipufs.daemon.trace import TraceFileRefused
from ipufs.fuse import requests as rq
from tests.fuse import fakekernel as fk


def _fds() -> set[str]:
    """This process's open descriptors, once what nothing refers to is
    collected (mmap objects keep a descriptor of their own until then)."""
    gc.collect()
    return set(os.listdir("/proc/self/fd"))


def _config(tmp_path: Path, **options: object) -> DaemonConfig:
    return DaemonConfig(mountpoint=str(tmp_path / "mnt"), ipus=2, profile="ipu1", state_dir=tmp_path / "state",
                        control=str(tmp_path / "ctl"), link_dev=False, cdi_dir=None,
                        **options)  # type: ignore[arg-type]


def _built_and_released(config: DaemonConfig) -> None:
    daemon = Daemon(config)  # the state lock is free again, or this refuses
    daemon.devices.close()
    assert daemon.state_lock is not None
    daemon.state_lock.release()


def test_a_bad_fault_plan_holds_nothing(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[[fault]]\nkind = "no-such-kind"\nat = 1\n')
    before = _fds()
    with pytest.raises(FaultError, match="plan.toml") as refused:
        Daemon(_config(tmp_path, fault_plan=str(plan)))
    del refused  # its traceback holds the daemon's frames
    assert _fds() == before
    _built_and_released(_config(tmp_path))


def test_a_trace_file_refused_after_the_devices_were_made_holds_nothing(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "trace.jsonl").symlink_to(tmp_path / "elsewhere")  # refused: never followed
    before = _fds()
    with pytest.raises(TraceFileRefused, match="symbolic link") as refused:
        Daemon(_config(tmp_path, trace_file=str(tmp_path / "trace.jsonl")))
    del refused  # its traceback holds the daemon's frames
    assert _fds() == before
    _built_and_released(_config(tmp_path))


def test_the_fuse_reader_takes_the_lock_quietly_for_an_ioctl_that_leaves_the_tiles_alone(tmp_path: Path) -> None:
    daemon = Daemon(_config(tmp_path))
    try:
        quiet = daemon.server.quiet
        assert quiet is not None and hasattr(daemon.lock, "acquire_quietly")

        def ioctl(name: str) -> memoryview:
            spec = abi.BY_NAME[name]
            return memoryview(fk.encode(rq.Ioctl(1, 2, rq.Context(0, 0, 1), 1, 0, spec.encodings[0].cmd(spec.nr), 0,
                                                 memoryview(b""), 0)))

        assert quiet(ioctl("SET_IPU_ID")) and not quiet(ioctl("RESET"))
    finally:
        daemon.devices.close()
        assert daemon.state_lock is not None
        daemon.state_lock.release()
