# The tile debug interface (TDI): per-tile debug registers, reached through
# the TDI aperture of config space. Register numbers and the TDI_STS bits
# are the public research repository's (docs/tdi.md of github.com/Saghetti0/graphcore-ipu-research).
# CTXT_STS, DBG_IEXEC and DBG_ECLR are answered with the executor, which
# also reads DBG_RBRK and DBG_RBRK_VERT (breakpoints)
# (ipufs/model/executor/debug.py, docs/execution.md).
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ipufs.abi.registers import TdiResult


class TdiRegister(enum.IntEnum):
    CTXT_STS = 0x00
    DBG_RBRK = 0x01
    DBG_RBRK_VERT = 0x02
    DBG_IEXEC = 0x03
    DBG_IOWNER = 0x04
    DBG_ECSR = 0x05
    DBG_ECLR = 0x06
    DBG_DATA = 0x07
    TDI_STS = 0x08
    TDI_CLR = 0x09
    INCOMING_DCOUNT = 0x0A
    EXCHANGE_CTL = 0x0B
    TDI_CTL = 0x0C


class TdiStatus(enum.IntFlag):
    CNQ = 1 << 0
    INV = 1 << 1
    DBLE = 1 << 2
    BUSY = 1 << 3


CONTEXTS = 7  # supervisor 0, workers 1..6
APERTURE = 16  # register indices per tile (TDBG_TDI_APERTURE_SPACE)
CONTEXT_IDLE = 0
CONTEXT_EXCEPTED = 2
_CTXT_STS, _DBG_ECSR, _TDI_STS, _DBG_IOWNER = (int(r) for r in (TdiRegister.CTXT_STS, TdiRegister.DBG_ECSR,
                                                                 TdiRegister.TDI_STS, TdiRegister.DBG_IOWNER))
#: registers that read what was last written
_HELD = tuple(int(r) for r in (TdiRegister.DBG_RBRK, TdiRegister.DBG_RBRK_VERT, TdiRegister.DBG_IOWNER, TdiRegister.DBG_DATA,
                               TdiRegister.EXCHANGE_CTL, TdiRegister.TDI_CTL))
READ_ONLY = {TdiRegister.CTXT_STS, TdiRegister.DBG_ECSR, TdiRegister.TDI_STS, TdiRegister.INCOMING_DCOUNT}
WRITE_ONLY = {TdiRegister.DBG_IEXEC, TdiRegister.DBG_ECLR, TdiRegister.TDI_CLR}


class TdiRefused(Exception):
    """A TDI register access that cannot be done; ``result`` says why."""

    def __init__(self, result: int, message: str) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class TileDebug:
    """The debug state of one tile (created on first use)."""

    registers: dict[int, int] = field(default_factory=dict)
    #: context -> exception cause (contexts that took an exception)
    excepted: dict[int, int] = field(default_factory=dict)
    status: int = 0

    def context_status(self) -> int:
        """CTXT_STS of a tile that never ran: two bits per context, context
        0 lowest (the executor gives running tiles'; executor/debug.py)."""
        word = 0
        for context in range(CONTEXTS):
            state = CONTEXT_EXCEPTED if context in self.excepted else CONTEXT_IDLE
            word |= state << (2 * context)
        return word

    def values(self) -> list[int]:
        """What a read of each register index answers (0 for the write-only
        ones and the indices the TDI does not have)."""
        regs = self.registers
        out = [0] * APERTURE
        out[_CTXT_STS] = self.context_status() if self.excepted else 0
        for reg in _HELD:
            out[reg] = regs.get(reg, 0)
        out[_DBG_ECSR] = self.excepted.get(regs.get(_DBG_IOWNER, 0), 0)
        out[_TDI_STS] = int(self.status)
        return out  # INCOMING_DCOUNT: 0, no exchange runs

    def read(self, reg: int) -> int:
        if reg not in TdiRegister.__members__.values() or reg in WRITE_ONLY:
            self.status |= TdiStatus.INV
            raise TdiRefused(TdiResult.BAD_REGISTER, f"TDI register 0x{reg:02x} cannot be read")
        return self.values()[reg]

    def write(self, reg: int, value: int) -> None:
        if reg not in TdiRegister.__members__.values() or reg in READ_ONLY:
            self.status |= TdiStatus.INV
            raise TdiRefused(TdiResult.BAD_REGISTER, f"TDI register 0x{reg:02x} cannot be written")
        if reg == TdiRegister.DBG_IEXEC:  # the executor injects it (executor/debug.py)
            return
        if reg == TdiRegister.DBG_IOWNER and not 0 <= value < CONTEXTS:
            self.status |= TdiStatus.INV
            raise TdiRefused(TdiResult.BAD_VALUE, f"DBG_IOWNER {value}: contexts are 0..6")
        if reg == TdiRegister.DBG_ECLR:
            self.excepted.pop(self.registers.get(TdiRegister.DBG_IOWNER, 0), None)
            return
        if reg == TdiRegister.TDI_CLR:  # the error flags; BUSY clears when the injection retires
            self.status &= ~(value & (TdiStatus.CNQ | TdiStatus.INV | TdiStatus.DBLE))
            return
        self.registers[reg] = value & 0xFFFFFFFFFFFFFFFF
