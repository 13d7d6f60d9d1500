# The assembly syntax of one instruction, both ways, as llvm-mc and
# llvm-objdump write it for Colossus: `mnemonic op, op, ...` in LLVM's
# operand order; $m0..$m15, $a0..$a15, pairs $a0:1, quads $a0:3, broadcast
# $a1:B/:BL/:BU; post-modified addresses marked +=, ++, @, >>; CSRs by name;
# targets as absolute addresses. Aliases accepted on input (nop, fnop,
# zero, mov, adds/addz...) are LLVM's (ColossusInstrInfo.td, alias block).
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ipufs.model.isa.csrs import csr_names
from ipufs.model.isa.decoder import Instruction
from ipufs.model.isa.operands import EncodingError, Kind, Operand, parse_register, register_name
from ipufs.model.isa.rows import ROWS
from ipufs.model.isa.table import Arch, Context, Row


class SyntaxProblem(ValueError):
    """An instruction the assembler cannot make sense of (the message is
    one line naming the problem)."""


@dataclass(frozen=True, slots=True)
class Token:
    """One written operand: a register (kind, number, mark) or a value
    (a number, a CSR name, or a symbol plus an addend, resolved later)."""

    text: str
    register: tuple[Kind, int] | None = None
    mark: str = ""
    number: int | None = None
    csr: str | None = None
    symbol: str | None = None


_MARK = re.compile(r"(.*?)(\+=|\+\+|@|>>)$")
_SYMBOL = re.compile(r"([A-Za-z_.][\w.$]*)\s*(?:([+-])\s*(\w+))?")
#: Which form wins when an immediate fits several: the sign-extended one
#: (as LLVM picks: the boot loader's `sub $m9, 18, $m1` and `min $m7, $m1,
#: 263` are si16 forms), then zero-extended, then the top-12-bits form.
_IMMEDIATE_ORDER = {Kind.SEXT: 0, Kind.ZEXT: 1, Kind.CSR: 1, Kind.UPPER_CSR: 1, Kind.TARGET: 1, Kind.TOP12: 2}
#: LLVM's aliases that force the sign- or zero-extended form.
FORCED_FORMS = {f"{m}{s}": (m, kind) for m in ("add", "cmpeq", "max", "min", "sub")
                for s, kind in (("s", Kind.SEXT), ("z", Kind.ZEXT))}


def parse_number(text: str) -> int | None:
    """``12``, ``-3``, ``0x1f``, ``0b101``; None if not a number."""
    try:
        return int(text, 0)
    except ValueError:
        return None


def parse_token(text: str) -> Token:
    text = text.strip()
    m = _MARK.fullmatch(text)
    mark = ""
    if m and m.group(1).startswith("$"):
        text, mark = m.group(1).strip(), m.group(2)
    if text.startswith("$"):
        reg = parse_register(text)
        if reg is not None:
            return Token(text, register=reg, mark=mark)
        if mark:
            raise SyntaxProblem(f"{text}{mark}: only a register takes {mark}")
        return Token(text, csr=text[1:])
    value = parse_number(text)
    if value is not None:
        return Token(text, number=value)
    s = _SYMBOL.fullmatch(text)
    if s:
        return Token(text, symbol=text)
    raise SyntaxProblem(f"cannot read operand {text!r}")


class Syntax:
    """Formats and reads instructions for one architecture and context
    (``supervisor``: True, False for a worker, None when not said: CSR
    names of either context are then accepted). ``strict`` refuses, on
    reading, instructions the context may not run (.supervisor/.worker)."""

    def __init__(self, arch: Arch = Arch.IPU1, supervisor: bool | None = None, strict: bool = False) -> None:
        self.arch = arch
        self.supervisor = supervisor
        self.strict = strict
        self._lower = csr_names(supervisor is not False, False, arch)
        self._upper = csr_names(False, True, arch)
        # Names read: the context's own, or (context not said) both contexts'
        # (their names differ where their numbers do; $PC and the debug
        # registers are the same in both).
        self._lower_numbers = {n: i for i, n in self._lower.items()}
        if supervisor is None:
            self._lower_numbers.update({n: i for i, n in csr_names(False, False, arch).items()})
        self._upper_numbers = {n: i for i, n in self._upper.items()}
        self._rows: dict[str, list[Row]] = {}
        for row in ROWS:
            if row.runs_on(arch):
                self._rows.setdefault(row.mnemonic, []).append(row)
        for rows in self._rows.values():
            rows.sort(key=lambda r: sum(_IMMEDIATE_ORDER.get(o.kind, 0) for o in r.operands))

    # -- output ---------------------------------------------------------
    def operand_text(self, op: Operand, value: int, symbols: Mapping[int, str] | None = None) -> str:
        kind = op.kind
        if kind.is_register:
            return register_name(kind, value) + op.mark
        if kind is Kind.CSR and value in self._lower:
            return "$" + self._lower[value]
        if kind is Kind.UPPER_CSR and value in self._upper:
            return "$" + self._upper[value]
        if kind is Kind.TARGET:
            return symbols[value] if symbols and value in symbols else f"{value:#x}"
        if kind is Kind.TOP12 or (kind is Kind.ZEXT and value >= 1024):
            return f"{value:#x}"
        return str(value)

    def text(self, inst: Instruction, symbols: Mapping[int, str] | None = None) -> str:
        """``add $m1, $m2, $m3``; targets named by ``symbols`` when given.
        As llvm-objdump does, ``or`` of the zero register with itself
        prints as ``zero`` and ``or`` with 0 as ``mov``."""
        alias = _alias(inst)
        if alias:
            return alias
        ops = ", ".join(self.operand_text(o, v, symbols) for o, v in zip(inst.row.operands, inst.operands))
        return f"{inst.mnemonic} {ops}" if ops else inst.mnemonic

    def exact_text(self, inst: Instruction, symbols: Mapping[int, str] | None = None) -> str | None:
        """The text that assembles back to this very encoding, or None if
        none does (a form the assembler would never pick, without an alias
        that forces it)."""
        for names in (symbols, None) if symbols else (None,):  # a target's label, else its address
            text = self.text(inst, names)
            if self._reads_back(text, inst, names):
                return text
            for alias, (mnemonic, kind) in FORCED_FORMS.items():
                if mnemonic == inst.mnemonic and any(o.kind is kind for o in inst.row.operands):
                    forced = alias + text[len(mnemonic):]
                    if self._reads_back(forced, inst, names):
                        return forced
        return None

    def _reads_back(self, text: str, inst: Instruction, symbols: Mapping[int, str] | None) -> bool:
        names = {n: a for a, n in symbols.items()} if symbols else {}
        try:
            row, values = self.read(text, lambda s: names[s])
        except (SyntaxProblem, KeyError):
            return False
        return row is inst.row and tuple(values) == inst.operands

    # -- input ----------------------------------------------------------
    def read(self, text: str, resolve: Callable[[str], int]) -> tuple[Row, list[int]]:
        """The row and operand values of one instruction's text; symbols
        are looked up with ``resolve`` (KeyError: not defined yet)."""
        mnemonic, _, rest = text.strip().partition(" ")
        mnemonic = mnemonic.lower()
        tokens = [parse_token(t) for t in _split(rest)] if rest.strip() else []
        mnemonic, tokens, forced = self._unalias(mnemonic, tokens)
        rows = self._rows.get(mnemonic)
        if rows is None:
            other = next((r for r in ROWS if r.mnemonic == mnemonic), None)
            if other is not None:
                raise SyntaxProblem(f"{mnemonic} needs {other.since.name.lower()} or later")
            raise SyntaxProblem(f"unknown instruction {mnemonic!r}")
        problems = []
        # First a form where every immediate is in its natural range, then
        # one taking a sign-extended field's unsigned spelling (0xff for -1).
        for natural in (True, False):
            for row in rows:
                if forced and not any(o.kind is forced for o in row.operands):
                    continue
                try:
                    values = self._match(row, tokens, resolve, natural)
                except SyntaxProblem as exc:
                    problems.append(str(exc))
                    continue
                self._check_context(row)
                return row, values
        unique = list(dict.fromkeys(problems))
        raise SyntaxProblem(unique[0] if len(unique) == 1 else
                            f"no form of {mnemonic} takes these operands ({'; '.join(unique)})")

    def _check_context(self, row: Row) -> None:
        if not self.strict:
            return
        if self.supervisor is True and Context.SUPERVISOR not in row.context:
            raise SyntaxProblem(f"{row.mnemonic} is a worker instruction (this is .supervisor code)")
        if self.supervisor is False and Context.WORKER not in row.context:
            raise SyntaxProblem(f"{row.mnemonic} is a supervisor instruction (this is .worker code)")

    def _unalias(self, mnemonic: str, tokens: list[Token]) -> tuple[str, list[Token], Kind | None]:
        if mnemonic in FORCED_FORMS:
            name, kind = FORCED_FORMS[mnemonic]
            return name, tokens, kind
        if mnemonic == "nop" and not tokens:
            return "setzi", [parse_token("$m14"), parse_token("0")], None
        if mnemonic == "fnop" and not tokens:
            if self.arch >= Arch.IPU21:
                raise SyntaxProblem("fnop's ipu21 encoding is not public: write the instruction meant")
            return "setzi", [parse_token("$a13"), parse_token("0")], None
        if mnemonic == "zero" and len(tokens) == 1 and tokens[0].register:
            kind = tokens[0].register[0]
            zero = {Kind.MRF: ("or", "$m15"), Kind.ARF: ("or", "$a15"), Kind.ARF_PAIR: ("or64", "$a14:15")}
            if kind in zero:
                name, reg = zero[kind]
                return name, [tokens[0], parse_token(reg), parse_token(reg)], None
        if mnemonic == "mov" and len(tokens) == 2 and tokens[0].register and tokens[1].register:
            if tokens[0].register[0] is Kind.ARF_PAIR:
                return "or64", [tokens[0], tokens[1], parse_token("$a14:15")], None
            return "or", [tokens[0], tokens[1], parse_token("0")], None
        return mnemonic, tokens, None

    def _match(self, row: Row, tokens: list[Token], resolve: Callable[[str], int], natural: bool) -> list[int]:
        if len(tokens) != len(row.operands):
            raise SyntaxProblem(f"{row.mnemonic} takes {len(row.operands)} operands, not {len(tokens)}")
        values = []
        for i, (op, tok) in enumerate(zip(row.operands, tokens), 1):
            if op.kind.is_register:
                if tok.register is None or tok.register[0] is not op.kind:
                    raise SyntaxProblem(f"operand {i} ({tok.text}) is not {_describe(op)}")
                if tok.mark != op.mark:
                    want = f"written {op.mark}" if op.mark else "written without a mark"
                    raise SyntaxProblem(f"operand {i} ({tok.text}{tok.mark}) must be {want}")
                value = tok.register[1]
            elif tok.register is not None:
                raise SyntaxProblem(f"operand {i} ({tok.text}) is not {_describe(op)}")
            else:
                value = self._value(op, tok, resolve, i)
                if natural and op.kind is Kind.SEXT and value >= 1 << (op.width - 1):
                    raise SyntaxProblem(f"operand {i}: {value} does not fit a {op.width}-bit signed immediate")
            try:
                op.raw(value)
            except EncodingError as exc:
                raise SyntaxProblem(f"operand {i}: {exc}") from None
            values.append(value)
        return values

    def _value(self, op: Operand, tok: Token, resolve: Callable[[str], int], i: int) -> int:
        if tok.csr is not None:
            names = self._upper_numbers if op.kind is Kind.UPPER_CSR else self._lower_numbers
            if op.kind not in (Kind.CSR, Kind.UPPER_CSR):
                raise SyntaxProblem(f"operand {i} ({tok.text}) is not {_describe(op)}")
            if tok.csr not in names:
                space = "upper (uget/uput)" if op.kind is Kind.UPPER_CSR else "lower (get/put)"
                raise SyntaxProblem(f"unknown CSR ${tok.csr} in the {space} space")
            return names[tok.csr]
        if tok.number is not None:
            return tok.number
        assert tok.symbol is not None
        m = _SYMBOL.fullmatch(tok.symbol)
        assert m
        addend = 0
        if m.group(3):
            n = parse_number(m.group(3))
            if n is None:
                raise SyntaxProblem(f"cannot read operand {tok.text!r}")
            addend = n if m.group(2) == "+" else -n
        return resolve(m.group(1)) + addend


def _alias(inst: Instruction) -> str | None:
    """``zero``/``mov`` for the ``or`` forms they stand for, else None."""
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


def _describe(op: Operand) -> str:
    return {
        Kind.MRF: "an $m register", Kind.ARF: "an $a register", Kind.ARF_PAIR: "an $a pair ($aN:N+1)",
        Kind.ARF_QUAD: "an $a quad ($aN:N+3)", Kind.MRF_PAIR: "an $m pair ($mN:N+1)",
        Kind.BROADCAST: "a broadcast $aN:B", Kind.BROADCAST_LOW: "a broadcast $aN:BL",
        Kind.BROADCAST_HIGH: "a broadcast $aN:BU",
    }.get(op.kind, "an immediate")


def _split(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts):
        raise SyntaxProblem(f"empty operand in {text.strip()!r}")
    return parts
