# Breakpoints of one tile: the instruction break channel ($DBG_IBRK0_CTL,
# _PC, _VERT), the data break channel ($DBG_DBRK0_CTL, _BASE), the host's
# retirement breaks (TDI DBG_RBRK, DBG_RBRK_VERT), and which of them apply
# to each context. Field layouts: the IPU1 constants of
# Saghetti0/graphcore-ipu-research (CSR_S_DBG_IBRK0_*, CSR_S_DBG_DBRK0_*,
# TDI_DBG_RBRK*, TDBG_*_IDBASE); meanings from Graphcore's ISA text (A114
# hover/$DBG_RBRK.md, $DBG_RBRK_VERT.md, $DBG_BRK_ID.md, $DBG_IEXEC.md)
# where it gives them and ipufs's own where it does not: docs/execution.md,
# "Breakpoints", says which is which. The debug unit builds them when a
# break register is written and hands them to the executor (watch), which
# asks these questions on the Python path; the native loop hands every turn
# of a context a breakpoint applies to back to it (native.BREAK).
from __future__ import annotations

from dataclasses import dataclass

from ipufs.model.executor.csr import DBRK_BASE, DBRK_CTL, DBRK_MDNR, DBRK_SIC, IBRK_CTL, IBRK_PC, IBRK_VERT
from ipufs.model.executor.state import Context

#: $DBG_IBRK0_CTL: ENS[0] ENW[1] EVM[2]
ENS, ENW, EVM = 1 << 0, 1 << 1, 1 << 2
#: $DBG_DBRK0_CTL: MLD[0] MSTNI[1] SIC[2] SIZE[5:3] MDNR[6] CTXT[21:15]
MLD, MSTNI, SIC, MDNR = 1 << 0, 1 << 1, DBRK_SIC, DBRK_MDNR
SIZE_SHIFT, CTXT_SHIFT = 3, 15
#: TDI DBG_RBRK: EN[6:0] (one bit per context), ATOV[30], VM_EN[31]
RBRK_EN, RBRK_ATOV, RBRK_VM_EN = 0x7F, 1 << 30, 1 << 31
#: the worker CSR holding the vertex base
_VERTEX_BASE = 0x02
#: addresses compare as 21-bit tile addresses, word-aligned where the field is ADDR[18:2] (ours)
_ADDRESS, _WORD = 0x1FFFFF, 0x1FFFFC


def refused_rbrk(value: int) -> str | None:
    """Why a write of ``value`` to TDI DBG_RBRK is refused, or None."""
    if value & RBRK_ATOV:
        return "DBG_RBRK.ATOV: what it does is not public"
    return None


@dataclass(frozen=True, slots=True)
class Breakpoints:
    """What breaks on one tile, read from its supervisor's CSRs and its TDI
    registers when one of them is written."""

    ibrk_ctl: int = 0
    ibrk_pc: int = 0
    ibrk_vert: int = 0
    dbrk_ctl: int = 0
    dbrk_base: int = 0
    rbrk: int = 0
    rbrk_vert: int = 0

    @classmethod
    def read(cls, supervisor_csrs: memoryview, rbrk: int, rbrk_vert: int) -> Breakpoints:
        """What breaks on a tile whose supervisor's CSRs are ``supervisor_csrs``
        and whose TDI holds DBG_RBRK ``rbrk`` and DBG_RBRK_VERT ``rbrk_vert``."""
        c = supervisor_csrs
        return cls(c[IBRK_CTL], c[IBRK_PC], c[IBRK_VERT], c[DBRK_CTL], c[DBRK_BASE], rbrk, rbrk_vert)

    def any(self) -> bool:
        return bool(self.ibrk_ctl & (ENS | ENW) or self.dbrk_ctl & (MLD | MSTNI) and self._dbrk_contexts()
                    or self.rbrk & RBRK_EN)

    def _dbrk_contexts(self) -> int:
        return (self.dbrk_ctl >> CTXT_SHIFT) & 0x7F

    def applies(self, context: int) -> bool:
        """Whether any break may stop ``context`` (then its turns run on the
        Python path); vertex matches are decided at the turn."""
        bit = 1 << context
        ibrk = self.ibrk_ctl & (ENW if context else ENS)
        dbrk = self.dbrk_ctl & (MLD | MSTNI) and self._dbrk_contexts() & bit
        return bool(ibrk or dbrk or self.rbrk & bit)

    @staticmethod
    def _vertex(c: Context, want: int) -> bool:
        return (c.csrs[_VERTEX_BASE] ^ want) & _WORD == 0

    def instruction(self, c: Context, pc: int) -> bool:
        """IBRK: ``c`` is about to issue at ``pc``: ENS (the supervisor) or
        ENW (workers) enables it, the PC matches $DBG_IBRK0_PC and, for a
        worker with EVM set, its $VERTEX_BASE matches $DBG_IBRK0_VERT."""
        ctl = self.ibrk_ctl
        if not ctl & (ENW if c.number else ENS) or (pc ^ self.ibrk_pc) & _WORD:
            return False
        return not (c.number and ctl & EVM) or self._vertex(c, self.ibrk_vert)

    def watch(self, c: Context) -> tuple[int, int, bool, bool] | None:
        """DBRK for ``c``'s next instruction: the watched bytes [first,
        end) and whether loads and stores match; None when it watches
        nothing for ``c``."""
        ctl = self.dbrk_ctl
        if not ctl & (MLD | MSTNI) or not self._dbrk_contexts() & (1 << c.number):
            return None
        first = self.dbrk_base & _ADDRESS
        return first, first + (1 << ((ctl >> SIZE_SHIFT) & 7)), bool(ctl & MLD), bool(ctl & MSTNI)

    def retirement(self, c: Context) -> bool:
        """RBRK: an instruction of ``c`` retired with EN set for it and, for
        a worker with VM_EN set, its $VERTEX_BASE matching DBG_RBRK_VERT."""
        if not self.rbrk & (1 << c.number):
            return False
        return not (c.number and self.rbrk & RBRK_VM_EN) or self._vertex(c, self.rbrk_vert)
