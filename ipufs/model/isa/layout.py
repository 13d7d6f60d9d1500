# The assembler's first pass: source items (source.py) to statements laid
# out in sections, so that each label's offset is known before anything is
# encoded (an instruction is one 32-bit word, sendpicp and a bundle two). It keeps
# the symbols `.set` defines with the statement each was set before, runs
# the conditional directives, numbers `1:` local labels, expands `ldconst`,
# and bounds every size by the largest tile memory. Directives: docs/isa.md.
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ipufs.model.isa.directives import Flags, SectionSpec, data_directive, parse_section
from ipufs.model.isa.expressions import Expr, ExpressionProblem, evaluate, parse
from ipufs.model.isa.rows import ROWS
from ipufs.model.isa.source import Item, items
from ipufs.model.isa.syntax import SyntaxProblem, split_operands

#: the mnemonics of two-word instructions (Row.wide)
_WIDE = frozenset(r.mnemonic for r in ROWS if r.wide)

_LOCAL_REF = re.compile(r"\b(\d+)([fb])\b")
_ASSIGN = re.compile(r"([A-Za-z_.$][\w.$]*)\s*=\s*(.+)")
_NAME = re.compile(r"[A-Za-z_.$][\w.$]*")


@dataclass
class AsmSection:
    """One output section: its bytes and where they go."""

    name: str
    flags: str  # "ax" code, "aw" writable data, "a" read-only data, "" not loaded
    address: int | None
    data: bytearray = field(default_factory=bytearray)
    align: int = 8

    @property
    def code(self) -> bool:
        return "x" in self.flags

    @property
    def loaded(self) -> bool:
        return "a" in self.flags


@dataclass
class Statement:
    """One thing to encode, at ``offset`` of ``section``; ``position``
    orders it among the `.set`s; ``flags`` are the directives in force."""

    line: int
    section: str
    offset: int
    kind: str  # "inst", "bundle", "data", "fill" (.align), "space" (.space: fill byte, size)
    body: tuple[str, ...]
    flags: Flags
    position: int
    width: int = 0  # bytes of each value of a "data" statement


@dataclass(frozen=True, slots=True)
class Assignment:
    """A `.set`: its expression, its value if that was a constant when it
    was set, the statement position it precedes."""

    expr: Expr
    value: int | None
    position: int
    line: int


class Layout:
    """The first pass over one source text: ``read(text)``, then read
    ``sections``, ``labels``, ``sets``, ``statements``, ``problems``
    (line, message) and ``warnings``. ``limit``: no byte may lie at or
    past this address; ``flags``: the context and leniencies to start with;
    ``defined``: symbols set before the first line (--defsym)."""

    def __init__(self, limit: int, flags: Flags = Flags(), defined: dict[str, int] | None = None) -> None:
        self.limit = limit
        self.sections: dict[str, AsmSection] = {}
        self.labels: dict[str, tuple[str, int, int]] = {}  # name -> (section, offset, line)
        self.sets: dict[str, list[Assignment]] = {
            name: [Assignment(Expr("num", (value,)), value, -1, 0)] for name, value in (defined or {}).items()}
        self.globals: set[str] = set()
        self.statements: list[Statement] = []
        self.problems: list[tuple[int, str]] = []
        self.warnings: list[tuple[int, str]] = []
        self.flags = flags
        self._current: AsmSection | None = None
        self._bundle: list[str] | None = None
        self._bundle_line = 0
        self._conditions: list[tuple[bool, bool]] = []  # (this branch assembles, some branch did)
        self._locals: dict[str, int] = {}

    # -- items ------------------------------------------------------------
    def read(self, text: str) -> None:
        for item in items(text):
            try:
                self._item(item)
            except (SyntaxProblem, ExpressionProblem) as exc:
                self.problems.append((item.line, str(exc)))
        if self._bundle is not None:
            self.problems.append((self._bundle_line, "instruction bundle without end"))
        if self._conditions:
            self.problems.append((0, ".if without .endif"))

    def _item(self, item: Item) -> None:
        if item.kind == "statement" and item.text.split()[0].lower() in _CONDITIONALS:
            self._conditional(item.text)
            return
        if self._conditions and not self._conditions[-1][0]:
            return
        if item.kind == "label":
            self._label(item.line, item.text)
        elif item.kind == "open":
            if self._bundle is not None:
                self.problems.append((item.line, "start of instruction bundle without end"))
            self._bundle, self._bundle_line = [], item.line
        elif item.kind == "close":
            self._close(item.line)
        elif self._bundle is not None:
            self._in_bundle(item.line, item.text)
        else:
            self._statement(item.line, item.text)

    def _label(self, line: int, name: str) -> None:
        if name.isdigit():
            count = self._locals.get(name, 0)
            self._locals[name] = count + 1
            name = _local_name(name, count)
        if name in self.labels or name in self.sets:
            first = self.labels[name][2] if name in self.labels else self.sets[name][0].line
            raise SyntaxProblem(f"label {name} is already defined on line {first}")
        s = self._here()
        self.labels[name] = (s.name, len(s.data), line)

    def _in_bundle(self, line: int, text: str) -> None:
        assert self._bundle is not None
        if text.split()[0].lower() == "ldconst":
            raise SyntaxProblem("ldconst is a macro of up to two instructions: not in a bundle")
        if text.startswith("."):
            raise SyntaxProblem(f"directive {text.split()[0]} inside a bundle")
        if len(self._bundle) == 2:
            raise SyntaxProblem("too many instructions in bundle")
        self._bundle.append(self._localised(text))

    def _close(self, line: int) -> None:
        if self._bundle is None:
            raise SyntaxProblem("end of instruction bundle without start")
        parts, self._bundle = self._bundle, None
        if not parts:
            raise SyntaxProblem("empty instruction bundle")
        if len(parts) == 1:
            raise SyntaxProblem("too few instructions in bundle")
        if self.flags.optimize and _is_rpt_and_fnop(parts) and self._offset() % 8 == 4:
            # LLVM's relaxation under .allow_optimizations (allow_optimizations-rpt.s): the fnop
            # goes, so that the body after a lone rpt starts 8-byte aligned.
            self._emit(self._bundle_line, "inst", (parts[0],), 4)
            return
        self._emit(self._bundle_line, "bundle", tuple(parts), 8)

    def _statement(self, line: int, text: str) -> None:
        assign = _ASSIGN.fullmatch(text)
        if assign and not text.startswith("."):
            self._set(line, assign.group(1), assign.group(2))
        elif text.startswith("."):
            self._directive(line, text)
        elif text.split()[0].lower() == "ldconst":
            self._ldconst(line, text)
        else:
            self._emit(line, "inst", (self._localised(text),), 8 if text.split()[0].lower() in _WIDE else 4)

    # -- directives -------------------------------------------------------
    def _directive(self, line: int, text: str) -> None:
        directive, _, args = text.replace("\t", " ").partition(" ")
        directive, args = directive.lower(), args.strip()
        flag = self.flags.toggled(directive)
        if flag is not None:
            self.flags = flag
        elif directive in (".text", ".data", ".section"):
            spec = parse_section(directive, args, self._constant)
            self._current = self._section(spec)
        elif directive in (".set", ".equ"):
            name, _, expr = args.partition(",")
            self._set(line, name.strip(), expr.strip())
        elif directive in (".align", ".p2align", ".balign"):
            self._align(line, directive, args)
        elif directive in (".globl", ".global"):
            self.globals.update(a.strip() for a in args.split(","))
        elif directive in (".space", ".skip", ".zero"):
            parts = split_operands(args)
            size = self._constant(parts[0])
            fill = self._constant(parts[1]) if len(parts) > 1 and directive != ".zero" else 0
            if not 0 <= size <= self.limit or not -128 <= fill < 256 or len(parts) > (1 if directive == ".zero" else 2):
                raise SyntaxProblem(f"{directive} takes a size up to {self.limit:#x} and a fill byte")
            self._emit(line, "space", (str(fill & 0xFF), str(size)), size)
        elif directive == ".size":
            parts = split_operands(args)
            if len(parts) != 2 or not _NAME.fullmatch(parts[0]) or not parts[1]:
                raise SyntaxProblem(".size takes NAME, EXPRESSION")
            parse(self._localised(parts[1]))
        else:
            width = data_directive(directive)
            if width is None:
                raise SyntaxProblem(f"unknown directive {directive}")
            values = tuple(self._localised(v) for v in split_operands(args))
            if not args or any(not v for v in values):
                raise SyntaxProblem(f"{directive} takes values separated by commas")
            self._emit(line, "data", values, width * len(values), width)

    def _align(self, line: int, directive: str, args: str) -> None:
        n = self._constant(split_operands(args)[0])
        if directive == ".p2align":
            if not 0 <= n < self.limit.bit_length():
                raise SyntaxProblem(f".p2align {n}: more than the tile memory ({self.limit:#x} bytes)")
            n = 1 << n
        if n <= 0 or n & (n - 1) or n > self.limit:
            raise SyntaxProblem(f"alignment {n} is not a power of two up to {self.limit:#x}")
        s = self._here()
        s.align = max(s.align, n)
        pad = -((s.address or 0) + len(s.data)) % n
        self._emit(line, "fill", (str(pad),), pad)

    def _set(self, line: int, name: str, text: str) -> None:
        if not _NAME.fullmatch(name) or not text:
            raise SyntaxProblem(".set takes NAME, EXPRESSION")
        if name in self.labels:
            raise SyntaxProblem(f"{name} is a label (line {self.labels[name][2]})")
        expr = parse(self._localised(text))
        value = self._value_now(expr)
        self.sets.setdefault(name, []).append(Assignment(expr, value, len(self.statements), line))

    def _conditional(self, text: str) -> None:
        directive, _, args = text.replace("\t", " ").partition(" ")
        directive = directive.lower()
        if directive in (".if", ".ifdef", ".ifndef"):
            outer = not self._conditions or self._conditions[-1][0]
            if directive == ".if":
                taken = outer and bool(self._constant(args))
            else:
                name = args.strip()
                taken = (name in self.labels or name in self.sets) == (directive == ".ifdef")
            self._conditions.append((outer and taken, not outer or taken))
        elif not self._conditions:
            raise SyntaxProblem(f"{directive} without .if")
        elif directive == ".else":
            _, done = self._conditions[-1]
            outer = len(self._conditions) < 2 or self._conditions[-2][0]
            self._conditions[-1] = (outer and not done, True)
        else:
            self._conditions.pop()

    def _ldconst(self, line: int, text: str) -> None:
        """`ldconst REG, CONSTANT`: setzi of the low 20 bits, then an or of
        the top 12 when they are not zero (ColossusAsmParser
        ExpandMacroLdconst: a constant known when the line is read)."""
        parts = split_operands(text.split(None, 1)[1] if " " in text else "")
        if len(parts) != 2:
            raise SyntaxProblem("ldconst takes a register and a constant")
        value = self._value_now(parse(self._localised(parts[1])))
        if value is None:
            raise SyntaxProblem(f"ldconst's operand {parts[1]} must be a constant (not a label)")
        if value > 0xFFFFFFFF:
            raise SyntaxProblem(f"ldconst's operand {value:#x} is too large")
        value &= 0xFFFFFFFF
        self._emit(line, "inst", (f"setzi {parts[0]}, {value & 0xFFFFF}",), 4)
        if value & 0xFFF00000:
            self._emit(line, "inst", (f"or {parts[0]}, {parts[0]}, {value & 0xFFF00000}",), 4)

    # -- values ------------------------------------------------------------
    def _value_now(self, expr: Expr) -> int | None:
        """The value of ``expr`` from the constants set so far, or None."""
        def constant(name: str) -> int:
            value = self.sets[name][-1].value if name in self.sets else None
            if value is None:
                raise KeyError(name)
            return value
        try:
            return evaluate(expr, constant, None)
        except KeyError:
            return None

    def _constant(self, text: str) -> int:
        value = self._value_now(parse(self._localised(text)))
        if value is None:
            raise SyntaxProblem(f"{text.strip()} is not a constant expression")
        return value

    def _localised(self, text: str) -> str:
        """``1f``/``1b`` to the names of the next/last ``1:``."""
        def name(m: re.Match[str]) -> str:
            count = self._locals.get(m.group(1), 0)
            return _local_name(m.group(1), count if m.group(2) == "f" else count - 1)
        return _LOCAL_REF.sub(name, text)

    # -- sections -----------------------------------------------------------
    def _section(self, spec: SectionSpec) -> AsmSection:
        s = self.sections.get(spec.name)
        if spec.address is not None and not 0 <= spec.address < self.limit:
            raise SyntaxProblem(f"{spec.address:#x} is past the end of tile memory ({self.limit:#x})")
        if s is None:
            s = self.sections[spec.name] = AsmSection(spec.name, spec.flags, spec.address)
        elif spec.address is not None and s.address is not None and spec.address != s.address:
            raise SyntaxProblem(f"section {spec.name} is already at {s.address:#x}")
        elif spec.address is not None:
            s.address = spec.address
        return s

    def _here(self) -> AsmSection:
        if self._current is None:
            self._current = self._section(SectionSpec(".text", "ax", None))
        return self._current

    def _offset(self) -> int:
        s = self._here()
        return (s.address or 0) + len(s.data)

    def _emit(self, line: int, kind: str, body: tuple[str, ...], size: int, width: int = 0) -> None:
        s = self._here()
        if (s.address or 0) + len(s.data) + size > self.limit:
            raise SyntaxProblem(f"section {s.name} grows past the end of tile memory ({self.limit:#x})")
        self.statements.append(Statement(line, s.name, len(s.data), kind, body, self.flags,
                                         len(self.statements), width))
        s.data += bytes(size)


_CONDITIONALS = {".if", ".ifdef", ".ifndef", ".else", ".endif"}


def _local_name(number: str, count: int) -> str:
    return f".Llocal.{number}.{count}"


def _is_rpt_and_fnop(parts: list[str]) -> bool:
    return parts[0].split()[0].lower() == "rpt" and parts[1].strip().lower() in ("fnop", "setzi $a13, 0")

