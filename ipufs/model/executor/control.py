# Semantics of control flow: branches, calls, brnzdec loops and rpt.
# Targets are absolute byte addresses (the decoder gives field << 2: A
# hover/bri.md, brz.md; R's boot loader words check it). No delay slots
# (none is mentioned anywhere: inferred). A branch to a bad address faults
# at the fetch of the target (TileAccess.fetch: INVALID_PC).
from __future__ import annotations

from typing import TYPE_CHECKING

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor.rule import Rule, s32
from ipufs.model.executor.state import Etype, Repeat, TileFault

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

A = "A hover/{}.md"


def _bri(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.next_pc = o[0]


def _br(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.next_pc = c.m[o[0]]


def _brz(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    if c.m[o[0]] == 0:
        c.next_pc = o[1]


def _brnz(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    if c.m[o[0]] != 0:
        c.next_pc = o[1]


def _brneg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    if s32(c.m[o[0]]) < 0:
        c.next_pc = o[1]


def _brpos(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    if s32(c.m[o[0]]) > 0:
        c.next_pc = o[1]


def _brnzdec(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    if c.m[o[0]] != 0:
        c.set_m(o[0], c.m[o[0]] - 1)
        c.next_pc = o[1]


def _call(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    target = o[1] & ((1 << 21) - 1)  # the field's bit 19 (byte address bit 21) is ignored
    c.set_m(o[0], c.next_pc)
    c.next_pc = target


def _rpt(count: int, size: int, ex: Machine, c: Context) -> None:
    first = c.next_pc
    end = first + 8 * (size + 1)
    if first % 8:
        raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, first,
                        f"rpt body at 0x{first:x} is not 8-byte aligned")
    if count == 0:
        c.next_pc = end
        return
    if c.repeat is not None:
        raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_OPERATION, c.pc, "rpt inside an rpt body")
    c.repeat = Repeat(first, end, count - 1)


def _rpt_reg(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    _rpt(c.m[o[0]] & 0xFFF, o[1], ex, c)


def _rpt_imm(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    _rpt(o[0], o[1], ex, c)


RULES: dict[str, Rule] = {
    "bri_mmmn_zi": Rule(_bri, A.format("bri") + " (absolute word address)", "bri"),
    "br_mmmn": Rule(_br, A.format("br"), "br"),
    "brz_mmmn_zi": Rule(_brz, A.format("brz") + " (bitwise zero test)", "brz"),
    "brnz_mmmn_zi": Rule(_brnz, A.format("brnz"), "brnz"),
    "brneg_mmmn_zi": Rule(_brneg, A.format("brneg") + " (signed < 0)", "brneg"),
    "brpos_mmmn_zi": Rule(_brpos, A.format("brpos") + " (signed > 0; zero not taken: inferred)", "brpos"),
    "brnzdec_mmmn_zi": Rule(_brnzdec, A.format("brnzdec") + " (if non-zero: decrement and branch)", "brnzdec"),
    "call_mmmn_zi": Rule(_call, A.format("call") + " (link = next instruction or bundle; field bit 19 ignored)",
                         "call"),
    "rpt_mmmn_zi": Rule(_rpt_reg, A.format("rpt") + " (count from the register's low 12 bits: R REPEAT_COUNT.VALUE)",
                        "rptm"),
    "rpt_mmmn_zi_zi": Rule(_rpt_imm, A.format("rpt") + "; body = SIZE + 1 bundles, count 0 skips it", "rpti"),
}
