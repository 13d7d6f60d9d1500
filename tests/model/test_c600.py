# An ipu21 model driven as a runtime drives a real C600 (osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs): a captured configuration replayed, the
# autoloader loading and starting every tile, and the host sync marks
# pacing the tiles' syncs with the host (docs/registers.md).
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import REGISTERS
from ipufs.model.debug import TdiRegister as T
from ipufs.model.executor.state import Status
from ipufs.model.ipu import Ipu
from ipufs.model.isa import Arch
from ipufs.model.isa.assembler import Assembler
from ipufs.model.profile import PROFILES, Region
from tests.model.executor.kit import start, tdi_read
from tests.model.test_ipu import sparse

P = PROFILES["ipu21"]
IMAGE = Path(__file__).parent / "data" / "c600-init.ipucfg"
HSP = (REGISTERS["HSP_GS1_CONTROL"].offset, REGISTERS["HSP_GS2_CONTROL"].offset)


def _ipu() -> Ipu:
    return Ipu(P, 0, {r: sparse(P.region_size(r)) for r in Region})


def _store(ipu: Ipu, offset: int, value: int) -> None:
    assert ipu.write_config(offset, struct.pack("<I", value)) == 4


def _load(ipu: Ipu, offset: int) -> int:
    return int(struct.unpack("<I", ipu.read_config(offset, 4))[0])


def _replay(ipu: Ipu) -> list[tuple[int, int]]:
    """What the runtime's replay_configuration does: every write of the
    image in order but the HSP registers', then both HSP registers 0."""
    data = IMAGE.read_bytes()
    assert data[:8] == b"IPUCFG1\0"
    count = struct.unpack_from("<I", data, 8)[0]
    assert len(data) == 12 + 8 * count == 12 + 8 * 2003
    writes = [struct.unpack_from("<II", data, 12 + 8 * k) for k in range(count)]
    for offset, value in writes:
        if offset not in HSP:
            _store(ipu, offset, value)
    for offset in HSP:
        _store(ipu, offset, 0)
        assert _load(ipu, offset) & 0xFFFF == 0
    return writes


def test_a_captured_configuration_replays_and_leaves_the_device_sane() -> None:
    ipu = _ipu()
    writes = _replay(ipu)
    final = dict(writes)
    for offset, value in final.items():  # every other offset is a plain register: it reads what was written
        if offset not in HSP and not 0x30000 <= offset < 0x47000:
            assert _load(ipu, offset) == value, hex(offset)
    # every tile's RUN_BREAK holds ATOV and nothing stopped; nothing raised
    assert {_load(ipu, 0x30000 + p * 0x40 + 4) for p in range(P.tiles)} == {0x40000000}
    assert all(tdi_read(ipu, t, T.CTXT_STS) == 0 and tdi_read(ipu, t, T.TDI_STS) == 0 for t in range(P.tiles))
    assert (_load(ipu, REGISTERS["EXC_STATUS"].offset), _load(ipu, REGISTERS["TILE_COUNT"].offset)) == (0, 1472)
    assert (_load(ipu, REGISTERS["CCSR"].offset), _load(ipu, REGISTERS["DCXCR0"].offset)) == (0x4, 0x07FFFFFA)
    # and tiles run code afterwards
    program = Assembler(Arch.IPU21).assemble(".text\n.supervisor\n_start:\n  setzi $m1, 0x51\n"
                                              "  put $DBG_DATA, $m1\n  trap 0\n")
    for section in program.sections:
        for at in range(0, len(section.data), 4):
            ipu.tiles.write(1471, (section.address or 0) + at, bytes(section.data[at:at + 4]))
    start(ipu, program.entry, (1471,))
    ipu.execution.run(1000)
    assert tdi_read(ipu, 1471, T.DBG_DATA) == 0x51


def _boot_image() -> bytes:
    """Code at tile memory's start: DBG_DATA = $TILE_ID, then wait."""
    program = Assembler(Arch.IPU21).assemble(".text 0x4c000\n.supervisor\n_start:\n  get $m1, $TILE_ID\n"
                                              "  put $DBG_DATA, $m1\nspin:\n  bri spin\n")
    data = bytes(program.sections[0].data)
    return data + bytes(-len(data) % 1024)


def test_the_autoloader_loads_every_tile_and_starts_it_as_the_runtime_drives_it() -> None:
    ipu = _ipu()
    image = _boot_image()
    csr, target, data = (REGISTERS[n].offset for n in ("AUTOLD_CSR", "AUTOLD_TARGET", "AUTOLD_DATA"))
    ipu.tiles.write(5, 0x4C000 + len(image) + 16, b"junk")  # what the load zeroes
    kib, lp, zone = len(image) // 1024, (len(image) // 4 - 1) & 0x3F, 32 << 20
    _store(ipu, csr, 0)
    for k in range(0, len(image), 4):
        _store(ipu, data, int.from_bytes(image[k:k + 4], "little"))
        assert _load(ipu, data) == 0  # taken
    _store(ipu, target, zone | kib << 10)
    _store(ipu, csr, 1 << 20 | 1 << 8 | lp)  # DATA_PRESENT | GO
    assert _load(ipu, csr) & 1 << 8 == 0  # done
    assert not ipu.execution.running
    _store(ipu, target, zone | 624 << 10 | kib)
    _store(ipu, csr, (P.tiles - 1) << 9 | 1 << 8 | lp)  # every tile
    assert _load(ipu, csr) & 1 << 8 == 0
    assert ipu.tiles.exchange.read(ipu.tiles.window_start(1000), len(image)) == image
    assert ipu.tiles.read(5, 0x4C000 + len(image) + 16, 4) == bytes(4)
    ipu.execution.run(100 * P.tiles)
    for tile in (0, 2, 1471):
        assert tdi_read(ipu, tile, T.DBG_DATA) == P.tile_map.physical[tile]  # $TILE_ID: where it sits
        assert tdi_read(ipu, tile, T.CTXT_STS) == Status.ACTIVE


@pytest.mark.parametrize("native", [True, False])
def test_host_sync_marks_pace_the_tiles_syncs_with_the_host(native: bool) -> None:
    ipu = _ipu()
    ipu.execution.native = native
    program = Assembler(Arch.IPU21).assemble(".text\n.supervisor\n_start:\n  setzi $m1, 1\n  sync 7\n"
                                              "  setzi $m1, 2\n  sync 7\n  setzi $m1, 3\n  trap 0\n")
    tiles = (0, 700, 1471)
    for tile in tiles:
        for section in program.sections:
            for at in range(0, len(section.data), 4):
                ipu.tiles.write(tile, (section.address or 0) + at, bytes(section.data[at:at + 4]))
    gs2 = HSP[1]
    _store(ipu, gs2, 0)  # the host takes the GS2 marks over (as after a replay)
    start(ipu, program.entry, tiles)
    ipu.execution.run(10_000)
    m1 = [ipu.execution.states[t].supervisor.m[1] for t in tiles]
    assert m1 == [1] * 3 and ipu.interrupts.raised[Interrupt.GS2_E0] == 0  # waiting for a mark
    _store(ipu, gs2, 1)
    ipu.execution.run(10_000)
    assert [ipu.execution.states[t].supervisor.m[1] for t in tiles] == [2] * 3
    assert _load(ipu, gs2) == 0 and ipu.interrupts.raised[Interrupt.GS2_E0] == 1  # taken
    _store(ipu, gs2, 5)  # more than the tiles take: what is left shows
    ipu.execution.run(10_000)
    assert [ipu.execution.states[t].supervisor.m[1] for t in tiles] == [3] * 3
    assert _load(ipu, gs2) == 4
    ipu.reset()
    assert _load(ipu, gs2) == 0 and not ipu.host.marks  # a reset hands the marks back
