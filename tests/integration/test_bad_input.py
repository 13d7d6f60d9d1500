# Hypothesis against a real mount: random register writes at random
# offsets and values (through pwrite and through a mapping), random ICU
# messages, random TDI commands. The daemon stays up, answers only
# documented errnos, keeps its invariants, and afterwards still serves a
# well-behaved client, with no signal ever sent to anyone.
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import struct
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipufs.abi import ioctls as abi
from ipufs.abi.icu import ERROR_MARKER, MESSAGE, Op, op_word
from ipufs.abi.registers import REGISTERS, TdiCommand, TdiResult
from tests.integration.harness import RunningDaemon, running_daemon

pytestmark = pytest.mark.mount
CONFIG_SIZE = 1 << 20
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def ipufs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with running_daemon(tmp_path_factory.mktemp("bad") / "mnt", ipus=2, profile="ipu1") as d:
        yield d


@pytest.fixture(scope="module")
def config(ipufs: RunningDaemon) -> Iterator[tuple[int, mmap.mmap]]:
    fd = os.open(ipufs.path("ipu0"), os.O_RDWR)
    bar = mmap.mmap(fd, CONFIG_SIZE, mmap.MAP_SHARED)
    yield fd, bar
    bar.close()
    os.close(fd)


#: ipu1's per-tile TDI registers (docs/registers.md): a refused write there fails with one of these
TILE_REGISTERS = (0x30000, 0x44000)
TILE_REGISTER_ERRNOS = {errno.EINVAL, errno.ERANGE, errno.EBUSY, errno.EOPNOTSUPP, errno.EIO}
register_offsets = (st.sampled_from([r.offset for r in REGISTERS.values()]) | st.integers(0, CONFIG_SIZE + 64)
                    | st.integers(TILE_REGISTERS[0] - 8, TILE_REGISTERS[1] + 8))


@FAST
@given(offset=register_offsets, data=st.binary(min_size=1, max_size=16), mapped=st.booleans())
def test_random_register_writes(ipufs: RunningDaemon, config: tuple[int, mmap.mmap], offset: int,
                                data: bytes, mapped: bool) -> None:
    fd, bar = config
    if mapped:
        end = min(offset + len(data), CONFIG_SIZE)
        if offset < end:
            bar[offset:end] = data[: end - offset]
        return
    covers_tiles = offset < TILE_REGISTERS[1] and offset + len(data) > TILE_REGISTERS[0]
    try:
        n = os.pwrite(fd, data, offset)
    except OSError as exc:
        # EPERM: past the end, or a change of INT_MASK by a process that is
        # not attached (this one never is); a refused per-tile TDI register.
        mask = REGISTERS["INT_MASK"].offset
        covers_mask = offset < mask + 4 and offset + len(data) > mask
        assert (exc.errno == errno.EPERM and (offset >= CONFIG_SIZE or covers_mask)
                or exc.errno in TILE_REGISTER_ERRNOS and covers_tiles), exc
    else:
        full = max(0, min(len(data), CONFIG_SIZE - offset))
        assert n == full or covers_tiles and 0 < n < full  # ends short at a refused tile register


@FAST
@given(words=st.tuples(*[st.integers(0, 2**32 - 1)] * 5), known=st.sampled_from(list(Op)), use_known=st.booleans(),
       queued=st.booleans())
def test_random_icu_messages(ipufs: RunningDaemon, config: tuple[int, mmap.mmap], words: tuple[int, ...],
                             known: Op, use_known: bool, queued: bool) -> None:
    fd, _ = config
    if use_known:
        words = (op_word(known, words[0] >> 28), *words[1:])
    name = "MAILBOX_WRITE_ONLY" if queued else "MAILBOX_WRITE_READ"
    spec = abi.BY_NAME[name]
    buf = bytearray(MESSAGE.pack(*words))
    fcntl.ioctl(fd, spec.cmd, buf, True)  # never an error: the ICU answers everything
    if not queued:
        answer = MESSAGE.unpack(buf)
        assert answer[0] != ERROR_MARKER or answer[1] in (1, 2, 3, 4)
    else:  # drain the response ring again
        out = bytearray(MESSAGE.size)
        try:
            fcntl.ioctl(fd, abi.BY_NAME["MAILBOX_READ_ONLY"].cmd, out, True)
        except OSError as exc:
            assert exc.errno == errno.EAGAIN  # a command without an answer (Reboot)


@FAST
@given(command=st.integers(0, 10), tile=st.integers(0, 1300), reg=st.integers(0, 20),
       address=st.integers(0, 2**22), width=st.sampled_from([0, 1, 2, 3, 4, 8, 16]),
       value=st.integers(0, 2**32 - 1))
def test_random_tdi_commands(ipufs: RunningDaemon, config: tuple[int, mmap.mmap], command: int, tile: int,
                             reg: int, address: int, width: int, value: int) -> None:
    fd, _ = config

    def put(name: str, v: int) -> None:
        assert os.pwrite(fd, struct.pack("<I", v & 0xFFFFFFFF), REGISTERS[name].offset) == 4

    for name, v in (("TDI_TILE", tile), ("TDI_REG", reg), ("TDI_ADDRESS", address), ("TDI_WIDTH", width),
                    ("TDI_DATA_LO", value)):
        put(name, v)
    put("CMD_TDI", command)
    result = int.from_bytes(os.pread(fd, 4, REGISTERS["TDI_RESULT"].offset), "little")
    assert result in {r.value for r in TdiResult}  # a documented answer (docs/registers.md)
    if command in (TdiCommand.READ_MEM, TdiCommand.WRITE_MEM) and tile < 1216 and width in (1, 2, 4, 8):
        assert result in (0, 1, 2)


GOOD_CLIENT = """
import sys
from ipufs.client import Device, SignalReceiver
from ipufs.abi.icu import Op, op_word
with SignalReceiver() as signals, Device(1, sys.argv[1]) as dev:
    dev.attach()
    dev.set_ipu_id(9)
    dev.sync(12)
    got = signals.wait_for(1, 5.0)
    clock = dev.icu_transfer((op_word(Op.READ_CLOCK), 0, 0, 0, 0))[1]
    result, _ = dev.tdi_read_memory(3, 0x40000, 8)
    print(" ".join(f"{s.signo}:{s.value}" for s in got), clock, result.name, flush=True)
"""


def test_after_the_storm_the_daemon_is_well(ipufs: RunningDaemon) -> None:
    driver = ipufs.daemon.driver
    assert sum(sum(s.values()) for s in driver.signals.sent) == 0  # nobody attached, nobody signalled
    assert len(driver.attachments) == 0
    for ipu in ipufs.daemon.devices.ipus:
        assert ipu.read_config(REGISTERS["VENDOR_ID"].offset, 4) == (0x1D95).to_bytes(4, "little")
    out = subprocess.run([sys.executable, "-c", GOOD_CLIENT, str(ipufs.mountpoint)], capture_output=True,
                         text=True, timeout=30)
    assert out.stdout.split() == ["47:9", "1600", "OK"], out.stderr
