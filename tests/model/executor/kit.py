# Helpers of the executor tests: an ipu1 model in sparse memory, source
# assembled with the project's assembler and written into tiles, programs
# started the way a host starts them (DBG_IOWNER, then a branch injected
# through DBG_IEXEC), registers read back through DBG_DATA.
from __future__ import annotations

from ipufs.abi.registers import TdiCommand, TdiResult
from ipufs.model.ipu import Ipu
from ipufs.model.isa import Arch, encode_row
from ipufs.model.isa.assembler import Assembled, Assembler
from ipufs.model.isa.rows import ROWS
from ipufs.model.debug import TdiRegister, TdiStatus
from tests.model.test_ipu import make, reg
from tests.model.test_ipu import put as put_u32

BASE = 0x40000
_ROW = {r.variant: r for r in ROWS}


def put(ipu: Ipu, name: str, value: int) -> None:
    """A register write (the value taken modulo 2**32, as a u32 store)."""
    put_u32(ipu, name, value & 0xFFFFFFFF)


def tdi_write(ipu: Ipu, tile: int, register: int, value: int) -> int:
    put(ipu, "TDI_TILE", tile)
    put(ipu, "TDI_REG", register)
    put(ipu, "TDI_DATA_LO", value)
    put(ipu, "TDI_DATA_HI", 0)
    put(ipu, "CMD_TDI", TdiCommand.WRITE_REG)
    return reg(ipu, "TDI_RESULT")


def tdi_read(ipu: Ipu, tile: int, register: int) -> int:
    put(ipu, "TDI_TILE", tile)
    put(ipu, "TDI_REG", register)
    put(ipu, "CMD_TDI", TdiCommand.READ_REG)
    assert reg(ipu, "TDI_RESULT") == TdiResult.OK
    return reg(ipu, "TDI_DATA_LO")


def word(variant: str, *operands: int) -> int:
    return encode_row(_ROW[variant], operands, False)


def assemble(source: str) -> Assembled:
    return Assembler(Arch.IPU1).assemble(source)


def load(ipu: Ipu, program: Assembled, tiles: tuple[int, ...] = (0,)) -> None:
    for tile in tiles:
        for section in program.sections:
            if section.data:
                assert section.address is not None
                _write(ipu, tile, section.address, bytes(section.data))


def _write(ipu: Ipu, tile: int, address: int, data: bytes) -> None:
    for at in range(0, len(data), 4):
        ipu.tiles.write(tile, address + at, data[at:at + 4].ljust(4, b"\0"))


def start(ipu: Ipu, entry: int, tiles: tuple[int, ...] = (0,), context: int = 0) -> None:
    """Start ``entry`` on ``context`` as a host does: DBG_IOWNER, then
    `bri entry` injected through DBG_IEXEC."""
    for tile in tiles:
        assert tdi_write(ipu, tile, TdiRegister.DBG_IOWNER, context) == TdiResult.OK
        assert tdi_write(ipu, tile, TdiRegister.DBG_IEXEC, word("bri_mmmn_zi", entry)) == TdiResult.OK


def one_worker(body: str, *, vertex: int, prelude: str = "", data: str = "") -> str:
    """Source whose supervisor runs ``prelude``, then `run`s one worker
    at ``body`` with vertex base ``vertex``, waits for it (sync 2) and
    traps; ``data`` follows in a .data section at ``vertex``."""
    return (f".text 0x40000\n.supervisor\n_start:\n{prelude}\n  setzi $m0, worker\n  setzi $m1, {vertex}\n"
            "  run $m0, $m1, 0\n  sync 2\n  trap 0\n.align 8\n.worker\nworker:\n"
            f"{body}\n  exitz $m15\n" + (f".data {vertex}\n{data}\n" if data else ""))


def run(source: str, tiles: tuple[int, ...] = (0,), budget: int = 1_000_000) -> Ipu:
    """Assemble ``source``, load it into ``tiles``, start them at the
    entry and run until nothing can run (or ``budget`` turns)."""
    ipu = make()
    program = assemble(source)
    load(ipu, program, tiles)
    start(ipu, program.entry, tiles)
    ipu.execution.run(budget)
    return ipu


def run_until_idle(source: str, tiles: tuple[int, ...], budget: int, native: bool | None = None,
                   calls: int = 100_000) -> Ipu:
    """As run(), but in calls of ``budget`` turns until no context can
    run (at most ``calls`` calls), on the native loop or not (None: the
    environment's choice)."""
    ipu = make()
    ipu.execution.native = native
    program = assemble(source)
    load(ipu, program, tiles)
    start(ipu, program.entry, tiles)
    for _ in range(calls):
        ipu.execution.run(budget)
        if not ipu.execution.busy():
            break
    return ipu


def m(ipu: Ipu, tile: int, register: int, context: int = 0) -> int:
    """$m``register`` of a stopped context, read as a host does: inject
    `put $DBG_DATA, $mN`, let it retire (TDI_STS.BUSY clears when the
    executor next runs), then read DBG_DATA."""
    assert tdi_write(ipu, tile, TdiRegister.DBG_IOWNER, context) == TdiResult.OK
    result = tdi_write(ipu, tile, TdiRegister.DBG_IEXEC, word("put_mmmn_zi", 0x70, register))
    assert result == TdiResult.OK, result
    assert tdi_read(ipu, tile, TdiRegister.TDI_STS) == TdiStatus.BUSY
    ipu.execution.run(0)
    assert tdi_read(ipu, tile, TdiRegister.TDI_STS) == 0
    return tdi_read(ipu, tile, TdiRegister.DBG_DATA)


def memory_word(ipu: Ipu, tile: int, address: int) -> int:
    return int.from_bytes(ipu.tiles.read(tile, address, 4), "little")
