# The tile debug interface's registers that the executor answers: CTXT_STS
# (each context's 2-bit status), DBG_IOWNER (naming the supervisor makes
# the tile a member of the IPU's syncs), DBG_IEXEC (inject one instruction
# into the DBG_IOWNER context, which must be inactive or excepted;
# TDI_STS.BUSY until it retires), DBG_ECLR (clear a context's exception),
# DBG_RBRK and DBG_RBRK_VERT (retirement breaks: breaks.py). Rules: A114
# hover/$DBG_IEXEC.md, $DBG_RBRK.md and R docs/tdi.md, as docs/execution.md
# states them; the other registers are TileDebug's
# (ipufs/model/tdi.py).
from __future__ import annotations

from typing import TYPE_CHECKING

from ipufs.abi.registers import TdiResult
from ipufs.model.executor import breaks
from ipufs.model.tdi import TdiRefused, TdiRegister, TdiStatus, TileDebug

if TYPE_CHECKING:
    from ipufs.model.executor.engine import Execution

_ERRORS = TdiStatus.CNQ | TdiStatus.INV | TdiStatus.DBLE


def register_values(ex: Execution, tile: int, debug: TileDebug) -> list[int]:
    """What a read of each TDI register index of ``tile`` answers
    (TileDebug.values, with CTXT_STS from the executor once the tile ran)."""
    out = debug.values()
    state = ex.states.get(tile)
    if state is not None:
        out[TdiRegister.CTXT_STS] = state.ctxt_sts()
    return out


def read_register(ex: Execution, tile: int, debug: TileDebug, reg: int) -> int:
    """A TDI register read (raises TdiRefused as TileDebug.read does)."""
    value = debug.read(reg)
    if reg == TdiRegister.CTXT_STS:
        return register_values(ex, tile, debug)[reg]
    return value


def write_register(ex: Execution, tile: int, debug: TileDebug, reg: int, value: int) -> int:
    """A TDI register write; returns its TDI_RESULT (raises TdiRefused as
    TileDebug.write does for registers it refuses)."""
    owner = debug.registers.get(TdiRegister.DBG_IOWNER, 0)
    if reg == TdiRegister.DBG_IEXEC:
        if debug.status & _ERRORS:
            return TdiResult.TDI_ERROR  # writes are ignored while an error flag is set
        if debug.status & TdiStatus.BUSY:
            debug.status |= TdiStatus.DBLE  # the last injection has not retired
            return TdiResult.TDI_ERROR
        result = ex.inject(tile, owner, value & 0xFFFFFFFF)
        if result == TdiResult.OK:
            debug.status |= TdiStatus.BUSY
        elif result == TdiResult.NOT_QUIESCENT:
            debug.status |= TdiStatus.CNQ
        else:
            debug.status |= TdiStatus.INV
        return result
    if reg == TdiRegister.DBG_ECLR:
        ex.clear_exception(tile, owner)
    if reg == TdiRegister.DBG_RBRK and (why := breaks.refused_rbrk(value)) is not None:
        debug.status |= TdiStatus.INV
        raise TdiRefused(TdiResult.BAD_VALUE, why)
    debug.write(reg, value)
    if reg == TdiRegister.DBG_IOWNER:
        ex.name(tile, value)
    elif reg in (TdiRegister.DBG_RBRK, TdiRegister.DBG_RBRK_VERT):
        ex.breaks_changed(tile)
    return TdiResult.OK
