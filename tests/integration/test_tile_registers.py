# The ipu1 layout through a real mount: the per-tile TDI registers of
# config space driven by pwrite/pread (Python) and by stores into the
# mapping (an unmodified C host), and the exchange BAR's tile windows from
# 0x0c000000 as the executor sees them. An injection retires in the
# daemon's executor task: a host polls TDI_STS until BUSY clears before the
# next one. docs/registers.md.
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from ipufs.abi.registers import TdiResult
from ipufs.client import Device
from ipufs.model.isa import encode_row
from ipufs.model.isa.rows import ROWS
from ipufs.model.debug import TdiRefused, TdiRegister as T, TdiStatus
from tests.integration.harness import ROOT, RunningDaemon, compile_c, running_daemon, wait_for

pytestmark = pytest.mark.mount

_ROW = {r.variant: r for r in ROWS}


def word(variant: str, *operands: int) -> int:
    return encode_row(_ROW[variant], operands, False)


SETZI_M2 = word("setzi_mmmn_zi", 2, 0x60000)
LD32_M3 = word("ld32_mmmn_zi", 3, 2, 15, 0)  # ld32 $m3, $m2, $m15, 0
PUT_M3 = word("put_mmmn_zi", 0x70, 3)  # put $DBG_DATA, $m3
SETZI_M3 = word("setzi_mmmn_zi", 3, 0x5EED)


@pytest.fixture
def ipu1(tmp_path: Path) -> object:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        yield d


def retired(device: Device, tile: int) -> int:
    """Wait for ``tile``'s injection to retire, reading TDI_STS through
    the per-tile registers until BUSY clears; returns TDI_STS."""
    assert wait_for(lambda: not device.read_tile_register(tile, T.TDI_STS) & TdiStatus.BUSY)
    return device.read_tile_register(tile, T.TDI_STS)


def test_pwrite_and_pread_of_a_tiles_registers_inject_and_read_dbg_data(ipu1: RunningDaemon) -> None:
    with Device(0, ipu1.mountpoint) as device:
        assert device.tile_register_offset(1215, T.DBG_DATA) == 0x30000 + 1215 * 0x40 + 7 * 4
        assert device.window_start(1215) == 0x0C00_0000 + 1215 * 0x40000
        os.pwrite(device.ex_fd, (0xC0FFEE).to_bytes(4, "little"), device.window_start(1215) + 0x20000)
        device.write_tile_register(1215, T.DBG_IOWNER, 1)  # an inactive worker takes injections as it is
        for instruction in (SETZI_M2, LD32_M3, PUT_M3):
            device.write_tile_register(1215, T.DBG_IEXEC, instruction)  # accepted: BUSY until it retires
            assert retired(device, 1215) == 0
        assert device.read_tile_register(1215, T.DBG_DATA) == 0xC0FFEE
        assert device.tdi_read_register(1215, T.DBG_DATA) == (TdiResult.OK, 0xC0FFEE)  # the same TileDebug
        assert device.read_tile_register(1215, T.TDI_STS) == 0


def test_an_instruction_before_the_last_retired_is_refused_until_dble_is_cleared(ipu1: RunningDaemon) -> None:
    """Two injections with no executor slice between them are made under
    the daemon's lock (through the mount the executor task may retire the
    first in between); the refusal's DBLE is then seen and cleared through
    the mount."""
    ipu = ipu1.daemon.devices.ipus[0]
    with Device(0, ipu1.mountpoint) as device:
        iexec = device.tile_register_offset(40, T.DBG_IEXEC)
        device.write_tile_register(40, T.DBG_IOWNER, 1)

        def twice() -> int:
            ipu.write_config(iexec, SETZI_M3.to_bytes(4, "little"))
            try:
                ipu.write_config(iexec, PUT_M3.to_bytes(4, "little"))
            except TdiRefused as refused:
                return refused.result
            return TdiResult.OK

        assert ipu1.call(twice) == TdiResult.TDI_ERROR
        assert retired(device, 40) == TdiStatus.DBLE  # the first retired; the second never ran
        with pytest.raises(OSError) as ignored:  # ignored while an error flag is set
            device.write_tile_register(40, T.DBG_IEXEC, PUT_M3)
        assert ignored.value.errno == errno.EIO
        device.write_tile_register(40, T.TDI_CLR, TdiStatus.DBLE)
        device.write_tile_register(40, T.DBG_IEXEC, PUT_M3)
        assert retired(device, 40) == 0
        assert device.read_tile_register(40, T.DBG_DATA) == 0x5EED  # $m3, which the first set


@pytest.mark.parametrize(("tile", "register", "value", "error"), [
    (1216, T.DBG_IOWNER, 0, errno.ERANGE),  # tile instances 1216..1279 hold no tile
    (0, T.CTXT_STS, 1, errno.EINVAL),  # read-only
    (0, 0xE, 1, errno.EINVAL),  # no such register
    (0, T.DBG_IEXEC, 0xFFFFFFFF, errno.EBUSY),  # the supervisor, inactive without RBRK, takes none
])
def test_a_refused_register_write_fails_with_its_errno(ipu1: RunningDaemon, tile: int, register: int, value: int,
                                                      error: int) -> None:
    with Device(0, ipu1.mountpoint) as device:
        with pytest.raises(OSError) as failed:
            device.write_tile_register(tile, register, value)
        assert failed.value.errno == error
        with pytest.raises(OSError) as misaligned:
            os.pwrite(device.fd, b"\0\0\0\0", device.tile_register_offset(0, T.DBG_DATA) + 2)
        assert misaligned.value.errno == errno.EINVAL


def test_an_injection_into_a_running_context_is_busy(ipu1: RunningDaemon) -> None:
    with Device(0, ipu1.mountpoint) as device:
        os.pwrite(device.ex_fd, word("bri_mmmn_zi", 0x40000).to_bytes(4, "little"), device.window_start(3))
        device.write_tile_register(3, T.DBG_IOWNER, 0)
        device.write_tile_register(3, T.DBG_RBRK, 1)  # stopped
        device.write_tile_register(3, T.DBG_IEXEC, word("bri_mmmn_zi", 0x40000))  # a loop: bri to itself
        assert retired(device, 3) == 0
        device.write_tile_register(3, T.DBG_RBRK, 0)
        device.write_tile_register(3, T.DBG_ECLR, 1)  # started
        assert device.read_tile_register(3, T.CTXT_STS) == 1
        with pytest.raises(OSError) as busy:
            device.write_tile_register(3, T.DBG_IEXEC, PUT_M3)
        assert busy.value.errno == errno.EBUSY
        assert device.read_tile_register(3, 8) == 1  # TDI_STS.CNQ
        device.reset()
        assert device.read_tile_register(3, T.CTXT_STS) == 0 and device.read_tile_register(3, 8) == 0


def test_a_store_into_a_tile_window_lands_in_that_tiles_memory(ipu1: RunningDaemon) -> None:
    ipu = ipu1.daemon.devices.ipus[0]
    with Device(0, ipu1.mountpoint) as device:
        assert len(device.exchange) == 0x2000_0000
        for tile in (0, 1, 608, 1215):
            at = 0x0C00_0000 + tile * 0x40000 + 0x100
            device.exchange[at:at + 4] = (0xA000 + tile).to_bytes(4, "little")  # through the mapping
            assert ipu1.call(lambda t=tile: int.from_bytes(ipu.tiles.read(t, 0x40100, 4), "little")) == 0xA000 + tile
            assert device.tdi_read_memory(tile, 0x40100, 4) == (TdiResult.OK, 0xA000 + tile)


def test_a_c_host_drives_a_tile_through_the_mapped_registers(ipu1: RunningDaemon, tmp_path: Path) -> None:
    """tests/c/tile_registers.c, built against ipu.h alone: the tile's data
    stored through the exchange mapping, three instructions stored into
    its DBG_IEXEC through the config mapping, each followed by polling
    TDI_STS there until BUSY clears, DBG_DATA read there."""
    binary = compile_c(ROOT / "tests" / "c" / "tile_registers.c", tmp_path)
    out = subprocess.run([str(binary), str(ipu1.mountpoint), "0", "1000", "0x5EED1", *map(hex, (SETZI_M2, LD32_M3,
                          PUT_M3))], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dbg 0x0005eed1", "ctxt_sts 0x0", f"beyond errno {errno.ERANGE}"]
    ipu = ipu1.daemon.devices.ipus[0]
    assert ipu1.call(lambda: int.from_bytes(ipu.tiles.read(1000, 0x60000, 4), "little")) == 0x5EED1
