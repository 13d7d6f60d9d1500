# Reading and writing a context's control and status registers (get/put
# on the lower space, uget/uput on a worker's upper space). Numbers and
# fields: Graphcore's LLVM MC tests (csrs_ipu*.s) and the IPU1 constants of
# Saghetti0/graphcore-ipu-research, as ipufs/model/isa/csrs.py names them.
# Side effects where documented (A hover/$<name>.md); a put to the
# exchange's multiplexer and format acts through exchange.py; the other
# exchange CSRs hold what is written, and the exchange keeps them; the
# accumulators' hold what is written and do nothing else. An index
# the context does not have, or a write to a register ipufs keeps
# read-only, faults (ETYPE INVALID_OP: ours; R names the cause INVALID_CSR).
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import native
from ipufs.model.executor.state import MASK, Etype, TileFault
from ipufs.model.isa import Arch
from ipufs.model.isa.csrs import csr_names

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

#: $TILE_ID reads the tile's physical number, held in its supervisor's row (Execution.state)
PC, SR, TILE_ID, DBG_DATA, DBG_BRK_ID, CTXT_STS = 0x00, 0x01, 0x03, 0x70, 0x71, 0x72
CR, WORKER0_BASE, SCOUNT_L, SCOUNT_U = 0x02, 0x21, 0x60, 0x61
#: the exchange CSRs the TDI mirrors (the C600's INCOMING_DCOUNT, EXCHANGE_CONTROL)
INCOMING_DCOUNT, EXCHANGE_CTL = 0xA6, 0xA9
#: the exchange CSRs a put to acts (exchange.py), and the armed syncs' count (`sans`)
INCOMING_MUX, INCOMING_MUXPAIR, INCOMING_FORMAT, ANS_DCOUNT = 0xA0, 0xA1, 0xA3, 0xAA
VERTEX_BASE, WORKER_BASE, REPEAT_COUNT, REPEAT_FIRST, REPEAT_END = 0x02, 0x03, 0x04, 0x05, 0x06
FP_STS, FP_CLR, FP_CTL, PRNG_0_0, PRNG_SEED = 0, 1, 2, 3, 7
CR_LC_CLR, CR_LC_SET = 1 << 0, 1 << 1
#: the supervisor's breakpoint CSRs (R ipu1_consts.c CSR_S_DBG_*__INDEX):
#: a put to one changes what breaks (the debug unit reads them: ipufs/model/debug/breaks.py)
DBG_CTL = 0x73
IBRK_CTL, IBRK_PC, IBRK_VERT = 0x80, 0x81, 0x82
DBRK_CTL, DBRK_BASE, DBRK_SIDA = 0x90, 0x91, 0x92
BREAK_CSRS = frozenset({IBRK_CTL, IBRK_PC, IBRK_VERT, DBRK_CTL, DBRK_BASE})
#: $DBG_BRK_ID of each break channel (R TDBG_IBRK_IDBASE, TDBG_DBRK_IDBASE)
IBRK_CHANNEL, DBRK_CHANNEL = 0, 1
#: $DBG_DBRK0_CTL's fields whose meaning is not public: SIC[2], MDNR[6]
DBRK_SIC, DBRK_MDNR = 1 << 2, 1 << 6
#: written only by the tile (or not at all), in each context's lower space
SUPERVISOR_READ_ONLY = frozenset({PC, SR, TILE_ID, CTXT_STS, DBG_BRK_ID})
WORKER_READ_ONLY = frozenset({PC, SR, VERTEX_BASE, WORKER_BASE, REPEAT_COUNT, REPEAT_FIRST, REPEAT_END,
                              SCOUNT_L, SCOUNT_U, DBG_BRK_ID})


def _refuse(c: Context, index: int, why: str) -> TileFault:
    return TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, c.pc, f"CSR 0x{index:02x}: {why}")


def _known(ex: Machine, c: Context, index: int, upper: bool) -> None:
    if index not in csr_names(not c.is_worker, upper, ex.arch):
        raise _refuse(c, index, "no such register in this context")


def read(ex: Machine, t: TileState, c: Context, index: int) -> int:
    """`get`: the value of lower-space CSR ``index``."""
    _known(ex, c, index, False)
    if index == PC:
        return c.pc
    if index == DBG_DATA:
        return ex.debug_data(t.tile)
    if index == DBG_BRK_ID:  # the channel of the context's last IBRK or DBRK (breaks.py)
        return c.csrs[DBG_BRK_ID]
    if not c.is_worker:
        if index == SR:
            return (c.sr & ~1) | t.link
        if index == CTXT_STS:
            return t.ctxt_sts()
        if index in (SCOUNT_L, SCOUNT_U):
            count = t.turns + t.count_offset
            return (count if index == SCOUNT_L else count >> 32) & MASK
        return c.csrs[index]
    if index == SR:
        return (c.sr & ~7) | (c.number - 1)
    if index == WORKER_BASE:
        return t.supervisor.csrs[WORKER0_BASE + c.number - 1]
    if index in (SCOUNT_L, SCOUNT_U):  # $COUNT_L/U: the same clock
        return (t.turns if index == SCOUNT_L else t.turns >> 32) & MASK
    if index == REPEAT_COUNT:
        return c.repeat.remaining + 1 if c.repeat else 0
    if index == REPEAT_FIRST:
        return c.repeat.first if c.repeat else 0
    if index == REPEAT_END:
        return c.repeat.end if c.repeat else 0
    return c.csrs[index]


def write(ex: Machine, t: TileState, c: Context, index: int, value: int) -> None:
    """`put`: store ``value`` in lower-space CSR ``index``."""
    _known(ex, c, index, False)
    if index in (WORKER_READ_ONLY if c.is_worker else SUPERVISOR_READ_ONLY):
        raise _refuse(c, index, "read-only in ipufs")
    if index == DBG_DATA:
        ex.set_debug_data(t.tile, value)
        return
    if not c.is_worker:
        if index == CR:  # LC_CLR / LC_SET act; the register reads 0 (ours)
            if value & CR_LC_CLR:
                t.link = 0
            if value & CR_LC_SET:
                t.link = 1
            return
        if index in (SCOUNT_L, SCOUNT_U):  # a put wins over the tick (A114 hover/$SCOUNT_L.md)
            count = t.turns + t.count_offset
            count = (count & ~MASK) | value if index == SCOUNT_L else (count & MASK) | value << 32
            t.count_offset = count - t.turns
            return
        if index in _EXCHANGE_PUTS and ex.exchange.put(t, c, index, value):
            return
        if index in BREAK_CSRS:
            if index == DBRK_CTL and value & (DBRK_SIC | DBRK_MDNR):
                raise TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc,
                                "$DBG_DBRK0_CTL.SIC and .MDNR: what they select is not public")
            c.csrs[index] = value & MASK
            ex.breaks_changed(t.tile)
            return
    c.csrs[index] = value & MASK


def read_upper(ex: Machine, t: TileState, c: Context, index: int) -> int:
    """`uget`: a worker's upper-space CSR; $FP_CLR and $PRNG_SEED read 0 (A hover)."""
    _known(ex, c, index, True)
    if index in (FP_CLR, PRNG_SEED):
        return 0
    return c.upper[index]


def write_upper(ex: Machine, t: TileState, c: Context, index: int, value: int) -> None:
    """`uput`: $FP_CLR clears the $FP_STS bits set in ``value``; $PRNG_SEED
    seeds the four PRNG words (A hover/$PRNG_SEED.md); others hold the value."""
    _known(ex, c, index, True)
    if index == FP_CLR:
        c.upper[FP_STS] = c.upper[FP_STS] & ~value & 0x7
        return
    if index == PRNG_SEED:
        v, nv = value & MASK, ~value & MASK
        words = (v, nv, ((v << 13) | (nv >> 19)) & MASK, ((nv << 13) | (v >> 19)) & MASK)
        for i, w in enumerate(words):
            c.upper[PRNG_0_0 + i] = w
        return
    c.upper[index] = value & MASK


#: what the native loop's get does with the registers read() computes, by context
#: ($DBG_BRK_ID is plain: the breaks write the channel into the context's CSRs)
_SUPERVISOR_GETS = {PC: "pc", SR: "ssr", CTXT_STS: "ctxt_sts", SCOUNT_L: "scount_l",
                    SCOUNT_U: "scount_u", DBG_DATA: "python"}
_WORKER_GETS = {PC: "pc", SR: "wsr", WORKER_BASE: "worker_base", SCOUNT_L: "count_l", SCOUNT_U: "count_u",
                REPEAT_COUNT: "repeat_count", REPEAT_FIRST: "repeat_first", REPEAT_END: "repeat_end",
                DBG_DATA: "python"}
#: puts with an effect beyond holding the value (or the debug registers, whose
#: breakpoints act): Python's
_EXCHANGE_PUTS = frozenset({INCOMING_MUX, INCOMING_MUXPAIR, INCOMING_FORMAT})
_SUPERVISOR_PUTS_PYTHON = frozenset({DBG_DATA, CR, SCOUNT_L, SCOUNT_U, *range(0x73, 0xA0), *_EXCHANGE_PUTS})
_WORKER_PUTS_PYTHON = frozenset({DBG_DATA})


def native_ops(arch: Arch) -> NDArray[np.uint8]:
    """The table the native loop executes get, put, uget and uput by
    (native.Loop's ``csr_ops``): for the supervisor and a worker, each
    access of each index as read()/write() and their upper forms do it,
    "plain" where the register only holds what is written, "python" where
    the access faults or acts beyond the arrays."""
    table = np.full((2, native.ACCESSES, 256), native.CSR_OPS["python"], np.uint8)
    for worker in (0, 1):
        gets = _WORKER_GETS if worker else _SUPERVISOR_GETS
        puts_python = _WORKER_PUTS_PYTHON if worker else _SUPERVISOR_PUTS_PYTHON
        read_only = WORKER_READ_ONLY if worker else SUPERVISOR_READ_ONLY
        for index in csr_names(not worker, False, arch):
            table[worker, native.GET, index] = native.CSR_OPS[gets.get(index, "plain")]
            if index not in read_only and index not in puts_python:
                table[worker, native.PUT, index] = native.CSR_OPS["plain"]
        for index in csr_names(not worker, True, arch):
            table[worker, native.UGET, index] = native.CSR_OPS["zero" if index in (FP_CLR, PRNG_SEED) else "plain"]
            if index not in (FP_CLR, PRNG_SEED):
                table[worker, native.UPUT, index] = native.CSR_OPS["plain"]
    return table
