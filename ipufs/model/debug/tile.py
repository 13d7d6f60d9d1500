# The debug state one tile's TDI holds itself: the registers that read
# what was last written, each context's exception cause (DBG_ECSR), and
# TDI_STS. CTXT_STS of a tile that ran comes from the executor
# (unit.py); this answers for a tile that never did.
from __future__ import annotations

from dataclasses import dataclass, field

from ipufs.abi.registers import TdiResult
from ipufs.model.debug.registers import (
    APERTURE, CONTEXT_EXCEPTED, CONTEXT_IDLE, CONTEXTS, HELD, KNOWN, READ_ONLY, WRITE_ONLY, TdiRefused,
    TdiRegister, TdiStatus,
)

_CTXT_STS, _DBG_ECSR, _TDI_STS, _DBG_IOWNER = (int(r) for r in (TdiRegister.CTXT_STS, TdiRegister.DBG_ECSR,
                                                                 TdiRegister.TDI_STS, TdiRegister.DBG_IOWNER))


@dataclass
class TileDebug:
    """The debug state of one tile (created on first use)."""

    registers: dict[int, int] = field(default_factory=dict)
    #: context -> exception cause (contexts that took an exception)
    excepted: dict[int, int] = field(default_factory=dict)
    status: int = 0

    @property
    def owner(self) -> int:
        """DBG_IOWNER: the context injections and DBG_ECLR address."""
        return self.registers.get(_DBG_IOWNER, 0)

    def context_status(self) -> int:
        """CTXT_STS of a tile that never ran: two bits per context, context
        0 lowest."""
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
        for reg in HELD:
            out[reg] = regs.get(reg, 0)
        out[_DBG_ECSR] = self.excepted.get(self.owner, 0)
        out[_TDI_STS] = int(self.status)
        return out  # INCOMING_DCOUNT: 0, no exchange runs

    def refuse(self, result: int, message: str) -> TdiRefused:
        """A refused access: TDI_STS.INV is set."""
        self.status |= TdiStatus.INV
        return TdiRefused(result, message)

    def check_read(self, reg: int) -> None:
        if reg not in KNOWN or reg in WRITE_ONLY:
            raise self.refuse(TdiResult.BAD_REGISTER, f"TDI register 0x{reg:02x} cannot be read")

    def write(self, reg: int, value: int) -> None:
        """A write of a register this state holds (the unit has acted on
        the others: DBG_IEXEC, and what DBG_ECLR does to the executor)."""
        if reg not in KNOWN or reg in READ_ONLY:
            raise self.refuse(TdiResult.BAD_REGISTER, f"TDI register 0x{reg:02x} cannot be written")
        if reg == TdiRegister.DBG_IEXEC:
            return
        if reg == TdiRegister.DBG_IOWNER and not 0 <= value < CONTEXTS:
            raise self.refuse(TdiResult.BAD_VALUE, f"DBG_IOWNER {value}: contexts are 0..6")
        if reg == TdiRegister.DBG_ECLR:
            self.excepted.pop(self.owner, None)
            return
        if reg == TdiRegister.TDI_CLR:  # the error flags; BUSY clears when the injection retires
            self.status &= ~(value & (TdiStatus.CNQ | TdiStatus.INV | TdiStatus.DBLE))
            return
        self.registers[reg] = value & 0xFFFFFFFFFFFFFFFF
