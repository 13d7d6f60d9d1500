# The other spellings of instructions that Graphcore's assembler reads
# (ColossusInstrInfo.td's alias block, its AsmParser's macros; the MC tests
# assemble-inst-alias.s, sub_immediate.s): each becomes the one row it
# stands for. And the two that llvm-objdump prints back, zero and mov.
from __future__ import annotations

from dataclasses import dataclass

from ipufs.model.isa.decoder import Instruction
from ipufs.model.isa.expressions import Expr
from ipufs.model.isa.operands import Kind, register_name
from ipufs.model.isa.table import Arch


class AliasProblem(ValueError):
    """An alias used where it has no meaning (one line)."""


@dataclass(frozen=True, slots=True)
class Token:
    """One written operand: a register (kind, number, post-modify mark) or
    an expression (numbers, symbols, CSR names), evaluated later."""

    text: str
    register: tuple[Kind, int] | None = None
    mark: str = ""
    expr: Expr | None = None


#: The aliases that force the sign- or zero-extended form.
FORCED_FORMS = {f"{m}{s}": (m, kind) for m in ("add", "cmpeq", "max", "min", "sub")
                for s, kind in (("s", Kind.SEXT), ("z", Kind.ZEXT))}


def _reg(kind: Kind, number: int) -> Token:
    return Token(register_name(kind, number), register=(kind, number))


def _num(value: int) -> Token:
    return Token(str(value), expr=Expr("num", (value,)))


def unalias(mnemonic: str, tokens: list[Token], arch: Arch) -> tuple[str, list[Token], Kind | None]:
    """The mnemonic and operands an alias stands for, and the immediate
    kind it forces (None: any); anything else unchanged."""
    if mnemonic in FORCED_FORMS:
        name, kind = FORCED_FORMS[mnemonic]
        return name, tokens, kind
    regs = [t.register for t in tokens]
    if mnemonic == "nop" and not tokens:
        return "setzi", [_reg(Kind.MRF, 14), _num(0)], None
    if mnemonic == "fnop" and not tokens:
        # setzi $a13, 0 on every architecture: Graphcore's ipu21 test
        # (assemble-inst-alias.s) prints both as fnop.
        return "setzi", [_reg(Kind.ARF, 13), _num(0)], None
    if mnemonic == "strap" and not tokens:
        if arch >= Arch.IPU21:
            raise AliasProblem("strap's ipu21 encoding is not public: write the instruction meant")
        return "put", [_num(255), _reg(Kind.MRF, 15)], None
    if mnemonic == "zero" and len(tokens) == 1 and regs[0]:
        zero = {Kind.MRF: ("or", 15), Kind.ARF: ("or", 15), Kind.ARF_PAIR: ("or64", 14)}
        if regs[0][0] in zero:
            name, number = zero[regs[0][0]]
            return name, [tokens[0], _reg(regs[0][0], number), _reg(regs[0][0], number)], None
    if mnemonic == "mov" and len(tokens) == 2 and regs[0] and regs[1]:
        if regs[0][0] is Kind.MRF and regs[1][0] is Kind.ARF:
            return "atom", tokens, None
        if regs[0][0] is Kind.ARF_PAIR:
            return "or64", [*tokens, _reg(Kind.ARF_PAIR, 14)], None
        return "or", [*tokens, _num(0)], None
    if mnemonic == "get" and len(tokens) == 2 and regs[0] and regs[0][0] is Kind.ARF:
        return "uget", tokens, None
    if mnemonic == "put" and len(tokens) == 2 and regs[1] and regs[1][0] is Kind.ARF:
        return "uput", tokens, None
    return mnemonic, tokens, None


def printed_alias(inst: Instruction) -> str | None:
    """``zero``/``mov`` for the ``or`` forms they stand for, as
    llvm-objdump prints them; else None."""
    if inst.mnemonic not in ("or", "or64"):
        return None
    kinds = [o.kind for o in inst.row.operands]
    ops = inst.operands
    zero = {Kind.MRF: 15, Kind.ARF: 15, Kind.ARF_PAIR: 14}
    if len(set(kinds)) == 1 and kinds[0] in zero and ops[1] == ops[2] == zero[kinds[0]]:
        return f"zero {register_name(kinds[0], ops[0])}"
    if kinds[2] is Kind.ZEXT and ops[2] == 0 and inst.mnemonic == "or":
        return f"mov {register_name(kinds[0], ops[0])}, {register_name(kinds[1], ops[1])}"
    return None
