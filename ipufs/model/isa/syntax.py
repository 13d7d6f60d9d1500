# The assembly syntax of one instruction, both ways, as llvm-mc and
# llvm-objdump write it for Colossus: `mnemonic op, op, ...` in LLVM's
# operand order; $m0..$m15, $a0..$a15, pairs $a0:1 (or $ap0), quads $a0:3,
# broadcast $a1:B/:BL/:BU; post-modified addresses marked +=, ++, @, >>;
# CSRs by name; immediates as expressions (expressions.py). Aliases:
# aliases.py. Where Graphcore's AsmParser reads a form in its own way, so
# does this (its MC tests check it: docs/isa.md lists them): a memory
# operand may leave out its delta register ($m15 then), `sub $m, $m, imm`
# is an add of -imm, and a branch target written as a constant (a number,
# or symbols set before the line) is a word address, while a label (or a
# symbol set later) is a byte address.
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ipufs.model.isa.aliases import FORCED_FORMS, AliasProblem, Token, printed_alias, unalias
from ipufs.model.isa.csrs import csr_names, name_numbers
from ipufs.model.isa.decoder import Instruction
from ipufs.model.isa.expressions import Expr, ExpressionProblem, evaluate, parse
from ipufs.model.isa.operands import EncodingError, Kind, Operand, parse_register, register_name
from ipufs.model.isa.rows import ROWS
from ipufs.model.isa.table import Arch, Context, Group, Row


class SyntaxProblem(ValueError):
    """An instruction the assembler cannot make sense of (the message is
    one line naming the problem)."""


@dataclass(frozen=True, slots=True)
class Scope:
    """How the symbols of one line resolve: ``values`` gives a symbol's
    value (KeyError: undefined), ``known`` whether it was a constant when
    the line was read (a `.set` before it), ``here`` the line's address."""

    values: Callable[[str], int] = field(default=lambda name: _undefined(name))
    known: Callable[[str], bool] = field(default=lambda name: False)
    here: int | None = None


def _undefined(name: str) -> int:
    raise KeyError(name)


_MARK = re.compile(r"(.*?)(\+=|\+\+|@|>>)$")
#: Which form wins when an immediate fits several: the sign-extended one
#: (as LLVM picks: the boot loader's `sub $m9, 18, $m1` and `min $m7, $m1,
#: 263` are si16 forms), then zero-extended, then the top-12-bits form.
_IMMEDIATE_ORDER = {Kind.SEXT: 0, Kind.ZEXT: 1, Kind.CSR: 1, Kind.UPPER_CSR: 1, Kind.TARGET: 1, Kind.TOP12: 2}
_CONTEXT = {True: "supervisor", False: "worker"}


def parse_token(text: str) -> Token:
    """One operand's text: a register (with its mark) or an expression."""
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
    try:
        return Token(text, expr=parse(text))
    except ExpressionProblem as exc:
        raise SyntaxProblem(f"cannot read operand {text!r}: {exc}") from None


def memory_offset(row: Row) -> bool:
    """Whether ``row`` is a base-delta-offset load or store (LLVM's MEMrrr,
    MEMrri): its delta may be left out, and an immediate offset must be a
    constant (ColossusAsmParser parseMEM3Operand)."""
    ops = row.operands
    return (row.group in (Group.LOAD, Group.STORE) and len(ops) == 4
            and all(o.kind is Kind.MRF and not o.mark for o in ops[1:3])
            and (ops[3].kind is Kind.ZEXT or (ops[3].kind is Kind.MRF and not ops[3].mark)))


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
        self._names = name_numbers(supervisor, arch)
        self._others = {} if supervisor is None else name_numbers(not supervisor, arch)
        self._rows: dict[str, list[Row]] = {}
        for row in ROWS:
            if row.runs_on(arch):
                self._rows.setdefault(row.mnemonic, []).append(row)
        for rows in self._rows.values():
            rows.sort(key=lambda r: sum(_IMMEDIATE_ORDER.get(o.kind, 0) for o in r.operands))

    # -- output ---------------------------------------------------------
    def operand_text(self, op: Operand, value: int, symbols: Mapping[int, str] | None = None,
                     source: bool = False) -> str:
        """One operand as llvm-objdump prints it; ``source``: as llvm-mc
        reads it back (a target without a name as its word address)."""
        kind = op.kind
        if kind.is_register:
            return register_name(kind, value) + op.mark
        if kind is Kind.CSR and value in self._lower:
            return "$" + self._lower[value]
        if kind is Kind.UPPER_CSR and value in self._upper:
            return "$" + self._upper[value]
        if kind is Kind.TARGET:
            if symbols and value in symbols:
                return symbols[value]
            return f"{value:#x} >> 2" if source else f"{value:#x}"
        if kind is Kind.TOP12 or (kind is Kind.ZEXT and value >= 1024):
            return f"{value:#x}"
        return str(value)

    def text(self, inst: Instruction, symbols: Mapping[int, str] | None = None, source: bool = False) -> str:
        """``add $m1, $m2, $m3``; targets named by ``symbols`` when given.
        As llvm-objdump does, ``or`` of the zero register with itself
        prints as ``zero`` and ``or`` with 0 as ``mov``."""
        alias = printed_alias(inst)
        if alias:
            return alias
        ops = ", ".join(self.operand_text(o, v, symbols, source) for o, v in zip(inst.row.operands, inst.operands))
        return f"{inst.mnemonic} {ops}" if ops else inst.mnemonic

    def exact_text(self, inst: Instruction, symbols: Mapping[int, str] | None = None) -> str | None:
        """The text that assembles back to this very encoding, or None if
        none does (a form the assembler would never pick, without an alias
        that forces it)."""
        for names in (symbols, None) if symbols else (None,):  # a target's label, else its address
            text = self.text(inst, names, source=True)
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
            row, values = self.read(text, Scope(names.__getitem__))
        except (SyntaxProblem, KeyError):
            return False
        return row is inst.row and tuple(values) == inst.operands

    # -- input ----------------------------------------------------------
    def read(self, text: str, scope: Scope, invalid_operands: bool = False) -> tuple[Row, list[int]]:
        """The row and operand values of one instruction's text.
        ``invalid_operands`` (LLVM's .allow_invalid_operands): a misaligned
        pair or quad is taken as the one it lies in, and an immediate too
        wide for its field gives the field its low bits."""
        mnemonic, _, rest = text.strip().partition(" ")
        mnemonic = mnemonic.lower()
        tokens = [parse_token(t) for t in _split(rest)] if rest.strip() else []
        try:
            mnemonic, tokens, forced = unalias(mnemonic, tokens, self.arch)
        except AliasProblem as exc:
            raise SyntaxProblem(str(exc)) from None
        if mnemonic == "sub" and len(tokens) == 3 and tokens[2].expr is not None and tokens[1].register:
            mnemonic, tokens, forced = "add", [tokens[0], tokens[1], self._negated(tokens[2], scope)], Kind.SEXT
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
                    values = self._match(row, tokens, scope, natural, invalid_operands)
                except SyntaxProblem as exc:
                    problems.append(str(exc))
                    continue
                self._check_context(row)
                return row, values
        unique = list(dict.fromkeys(problems))
        raise SyntaxProblem(unique[0] if len(unique) == 1 else
                            f"no form of {mnemonic} takes these operands ({'; '.join(unique)})")

    def _negated(self, token: Token, scope: Scope) -> Token:
        """`sub $mD, $mS, imm` is `add $mD, $mS, -imm` (ColossusAsmParser
        ExpandMacroSubImm): imm a constant whose negation fits si16."""
        assert token.expr is not None
        value, constant = self._evaluate(token.expr, scope, None)
        if not constant:
            raise SyntaxProblem(f"sub's immediate {token.text} must be a constant")
        if not -(1 << 15) < value < 1 << 15:
            raise SyntaxProblem(f"sub's immediate {value} is out of range (-32767..32767)")
        return Token(str(-value), expr=Expr("num", (-value,)))

    def _check_context(self, row: Row) -> None:
        if not self.strict or self.supervisor is None:
            return
        want = Context.SUPERVISOR if self.supervisor else Context.WORKER
        if want not in row.context:
            kind = _CONTEXT[not self.supervisor]
            raise SyntaxProblem(f"{row.mnemonic} is a {kind} instruction (this is .{_CONTEXT[self.supervisor]} code)")

    def _match(self, row: Row, tokens: list[Token], scope: Scope, natural: bool, invalid: bool) -> list[int]:
        if memory_offset(row) and len(tokens) == 3:
            tokens = [tokens[0], tokens[1], Token("$m15", register=(Kind.MRF, 15)), tokens[2]]
        if len(tokens) != len(row.operands):
            raise SyntaxProblem(f"{row.mnemonic} takes {len(row.operands)} operands, not {len(tokens)}")
        values = []
        for i, (op, tok) in enumerate(zip(row.operands, tokens), 1):
            if op.kind.is_register:
                value = self._register(op, tok, i, invalid)
            elif tok.register is not None or tok.expr is None:
                raise SyntaxProblem(f"operand {i} ({tok.text}) is not {_describe(op)}")
            else:
                value = self._immediate(row, op, tok, i, scope, natural, invalid)
            try:
                op.raw(value)
            except EncodingError as exc:
                raise SyntaxProblem(f"operand {i}: {exc}") from None
            values.append(value)
        return values

    def _register(self, op: Operand, tok: Token, i: int, invalid: bool) -> int:
        if tok.register is None or tok.register[0] is not op.kind:
            raise SyntaxProblem(f"operand {i} ({tok.text}) is not {_describe(op)}")
        if tok.mark != op.mark:
            want = f"written {op.mark}" if op.mark else "written without a mark"
            raise SyntaxProblem(f"operand {i} ({tok.text}{tok.mark}) must be {want}")
        value = tok.register[1]
        if invalid and op.kind in _ALIGN:
            value &= ~(_ALIGN[op.kind] - 1)
        return value

    def _immediate(self, row: Row, op: Operand, tok: Token, i: int, scope: Scope, natural: bool,
                   invalid: bool) -> int:
        assert tok.expr is not None
        value, constant = self._evaluate(tok.expr, scope, op.kind)
        if memory_offset(row) and i == 4 and not constant:
            raise SyntaxProblem(f"operand {i} ({tok.text}): a memory offset must be a constant")
        if op.kind is Kind.TARGET and constant:
            value *= 4  # a constant target is a word address (LLVM's Rel19S2 operand)
        if invalid:
            value = op.value(op.raw(value & ((1 << (op.width + (2 if op.kind is Kind.TARGET else 0))) - 1))) or 0
        if natural and op.kind is Kind.SEXT and value >= 1 << (op.width - 1):
            raise SyntaxProblem(f"operand {i}: {value} does not fit a {op.width}-bit signed immediate")
        return value

    def _evaluate(self, expr: Expr, scope: Scope, kind: Kind | None) -> tuple[int, bool]:
        """The value of ``expr`` and whether it was a constant when its
        line was read (CSR names are)."""
        def lookup(name: str) -> int:
            if "@" in name:
                raise SyntaxProblem(f"{name}: relocation specifiers are not taken (ipufs asm links in one step)")
            if name.startswith("$"):
                if name[1:] in self._names:
                    return self._names[name[1:]]
                if self.supervisor is not None and name[1:] in self._others:
                    raise SyntaxProblem(f"the CSR {name} cannot be used in {_CONTEXT[self.supervisor]} code")
            try:
                return scope.values(name)
            except KeyError:
                what = "CSR" if kind in (Kind.CSR, Kind.UPPER_CSR) and name.startswith("$") else "symbol"
                raise SyntaxProblem(f"unknown {what} {name}" if what == "CSR" else f"undefined symbol {name}") \
                    from None
        try:
            value = evaluate(expr, lookup, scope.here)
        except ExpressionProblem as exc:
            raise SyntaxProblem(str(exc)) from None
        except KeyError:  # `.` outside a statement
            raise SyntaxProblem("`.` has no address here") from None
        names = expr.symbols()
        constant = not expr.uses_here and all(
            (n.startswith("$") and n[1:] in self._names) or scope.known(n) for n in names)
        return value, constant


_ALIGN = {Kind.ARF_PAIR: 2, Kind.ARF_QUAD: 4, Kind.MRF_PAIR: 2}


def _describe(op: Operand) -> str:
    return {
        Kind.MRF: "an $m register", Kind.ARF: "an $a register", Kind.ARF_PAIR: "an $a pair ($aN:N+1)",
        Kind.ARF_QUAD: "an $a quad ($aN:N+3)", Kind.MRF_PAIR: "an $m pair ($mN:N+1)",
        Kind.BROADCAST: "a broadcast $aN:B", Kind.BROADCAST_LOW: "a broadcast $aN:BL",
        Kind.BROADCAST_HIGH: "a broadcast $aN:BU",
    }.get(op.kind, "an immediate")


def split_operands(text: str) -> list[str]:
    """Operands separated by commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for at, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _split(text: str) -> list[str]:
    parts = split_operands(text)
    if any(not p for p in parts):
        raise SyntaxProblem(f"empty operand in {text.strip()!r}")
    return parts
