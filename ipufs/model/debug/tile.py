# The debug state one tile's TDI holds itself: the registers that read
# what was last written (DBG_RBRK, DBG_RBRK_VERT, DBG_IOWNER, DBG_ECSR,
# DBG_DATA, TDI_CTL) and TDI_STS. CTXT_STS and the exchange mirrors come
# from the executor (unit.py).
from __future__ import annotations

from dataclasses import dataclass, field

from ipufs.abi.registers import TdiResult
from ipufs.model.debug.registers import TdiRefused, TdiRegister, TdiStatus

_DBG_IOWNER = int(TdiRegister.DBG_IOWNER)


@dataclass
class TileDebug:
    """The debug state of one tile (created on first use)."""

    registers: dict[int, int] = field(default_factory=dict)
    status: int = 0

    @property
    def owner(self) -> int:
        """DBG_IOWNER: the context injections address."""
        return self.registers.get(_DBG_IOWNER, 0)

    def held(self, reg: int) -> int:
        return self.registers.get(reg, 0)

    def refuse(self, result: int, message: str) -> TdiRefused:
        """A refused access: TDI_STS.INV is set."""
        self.status |= TdiStatus.INV
        return TdiRefused(result, message)

    def clear_flags(self, flags: int) -> None:
        """TDI_CLR: the error flags given; BUSY clears when the injection retires."""
        self.status &= ~(flags & (TdiStatus.CNQ | TdiStatus.INV | TdiStatus.DBLE))


def refused_access(debug: TileDebug, reg: int, what: str) -> TdiRefused:
    return debug.refuse(TdiResult.BAD_REGISTER, f"TDI register 0x{reg:02x} cannot be {what}")
