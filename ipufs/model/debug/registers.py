# The tile debug interface's registers: their numbers, the TDI_STS flags,
# which are read-only or write-only, and the refusal an access can meet.
# Register numbers and the TDI_STS bits are the public research
# repository's (docs/tdi.md of github.com/Saghetti0/graphcore-ipu-research).
from __future__ import annotations

import enum


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


#: the error flags: while one is set, DBG_IEXEC is ignored
ERRORS = TdiStatus.CNQ | TdiStatus.INV | TdiStatus.DBLE
CONTEXTS = 7  # supervisor 0, workers 1..6
APERTURE = 16  # register indices per tile (TDBG_TDI_APERTURE_SPACE)
CONTEXT_IDLE = 0
CONTEXT_EXCEPTED = 2
#: registers that read what was last written
HELD = tuple(int(r) for r in (TdiRegister.DBG_RBRK, TdiRegister.DBG_RBRK_VERT, TdiRegister.DBG_IOWNER,
                              TdiRegister.DBG_DATA, TdiRegister.EXCHANGE_CTL, TdiRegister.TDI_CTL))
READ_ONLY = frozenset({TdiRegister.CTXT_STS, TdiRegister.DBG_ECSR, TdiRegister.TDI_STS, TdiRegister.INCOMING_DCOUNT})
WRITE_ONLY = frozenset({TdiRegister.DBG_IEXEC, TdiRegister.DBG_ECLR, TdiRegister.TDI_CLR})
KNOWN = frozenset(int(r) for r in TdiRegister)


class TdiRefused(Exception):
    """A TDI register access that cannot be done; ``result`` (a
    TdiResult) says why."""

    def __init__(self, result: int, message: str) -> None:
        super().__init__(message)
        self.result = result
