# Hypothesis over ioctl type, number, direction, size and argument against
# a real mount: the daemon answers only documented errnos, keeps serving,
# and no process that did not attach ever receives a signal.
from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipufs.abi import ioctls as abi
from ipufs.abi.interrupts import Interrupt
from tests.integration.harness import RunningDaemon, running_daemon

pytestmark = pytest.mark.mount

DOCUMENTED = {errno.ENOTTY, errno.EINVAL, errno.EBUSY, errno.EPERM, errno.EFAULT, errno.ENOSPC, errno.EAGAIN,
              errno.ETIMEDOUT}


@pytest.fixture(scope="module")
def ipufs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with running_daemon(tmp_path_factory.mktemp("ioctl") / "mnt", ipus=1, profile="ipu1") as d:
        yield d


commands = st.one_of(
    st.builds(abi.ioc, st.integers(0, 3), st.sampled_from([s.nr for s in abi.IOCTLS]) | st.integers(0, 255),
              st.sampled_from([0, 4, 8, 16, 32]) | st.integers(0, 64)),
    st.builds(abi.ioc, st.integers(0, 3), st.integers(0, 255), st.integers(0, 64), st.integers(0, 255)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmd=commands, payload=st.binary(min_size=64, max_size=64), value=st.integers(-(2**31), 2**31 - 1))
def test_random_ioctls_get_documented_answers(ipufs: RunningDaemon, cmd: int, payload: bytes, value: int) -> None:
    direction, type_, nr, size = abi.ioc_fields(cmd)
    fd = os.open(ipufs.path("ipu0"), os.O_RDWR)
    try:
        if size:
            fcntl.ioctl(fd, cmd, bytearray(payload[:size]), True)
        else:
            fcntl.ioctl(fd, cmd, value)
    except OSError as exc:
        assert exc.errno in DOCUMENTED or (type_ != 0xED and exc.errno in (errno.ENOTTY, errno.EINVAL))
    finally:
        os.close(fd)


GOOD_CLIENT = """
import sys
from ipufs.client import Device, SignalReceiver
with SignalReceiver() as signals, Device(0, sys.argv[1]) as dev:
    dev.attach()
    dev.set_ipu_id(3)
    print("attached", flush=True)
    got = signals.wait_for(1, 5.0)
    print(" ".join(f"{s.signo}:{s.value}" for s in got), flush=True)
"""


def test_after_the_storm_a_good_client_works_and_nobody_was_signalled(ipufs: RunningDaemon) -> None:
    driver = ipufs.daemon.driver
    assert sum(sum(d.values()) for d in driver.signals.sent) == 0
    assert driver.attachments.get(0) is None  # this process's files are all closed
    proc = subprocess.Popen([sys.executable, "-c", GOOD_CLIENT, str(ipufs.mountpoint)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "attached"
        ipufs.call(lambda: driver.raise_interrupt(0, Interrupt.GS2_E0))
        assert proc.stdout.readline().split() == ["48:3"]
        assert proc.wait(5) == 0
    finally:
        proc.kill()
        proc.communicate()
