# The assembler's first pass: source lines to statements laid out in
# sections (every instruction one 32-bit word, a bundle two, so each
# label's offset is known before anything is encoded). Directives as in
# docs/isa.md: .text/.data/.section at addresses, .word/.int/.long/.byte,
# .align/.p2align/.balign, .globl, .supervisor/.worker; `#` and `//`
# comments; bundles `{ a ; b }` on one line or over several.
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ipufs.model.isa.syntax import SyntaxProblem, parse_number

_LABEL = re.compile(r"\s*([A-Za-z_.][\w.$]*)\s*:(?!\S)")
_SECTION = re.compile(r'([\w.$]+)(?:\s*,\s*"([a-z]*)")?(?:\s*,\s*(\S+))?$')


@dataclass
class AsmSection:
    """One output section: its bytes and where they go."""

    name: str
    flags: str  # "ax" code, "aw" writable data, "a" read-only data
    address: int | None
    data: bytearray = field(default_factory=bytearray)
    align: int = 8

    @property
    def code(self) -> bool:
        return "x" in self.flags


@dataclass
class Statement:
    """One thing to encode, at ``offset`` of ``section``; ``mode`` is the
    context said last (.supervisor: True, .worker: False, else None)."""

    line: int
    section: str
    offset: int
    kind: str  # "inst", "bundle", "words", "bytes", "fill"
    body: tuple[str, ...]
    mode: bool | None


class Layout:
    """The first pass over one source text: feed it ``read(number, line)``
    line by line, then ``finish()``; problems are (line, message)."""

    def __init__(self) -> None:
        self.sections: dict[str, AsmSection] = {}
        self.labels: dict[str, tuple[str, int, int]] = {}  # name -> (section, offset, line)
        self.globals: set[str] = set()
        self.statements: list[Statement] = []
        self.problems: list[tuple[int, str]] = []
        self._current: AsmSection | None = None
        self._mode: bool | None = None
        self._bundle: list[str] | None = None
        self._bundle_line = 0

    def read(self, number: int, raw: str) -> None:
        try:
            self._read(number, _strip_comment(raw).strip())
        except SyntaxProblem as exc:
            self.problems.append((number, str(exc)))

    def finish(self) -> None:
        if self._bundle is not None:
            self.problems.append((self._bundle_line, "bundle not closed with }"))

    def _read(self, number: int, line: str) -> None:
        while self._bundle is None:  # labels, possibly several, before anything else on the line
            m = _LABEL.match(line)
            if not m:
                break
            name = m.group(1)
            if name in self.labels:
                raise SyntaxProblem(f"label {name} is already defined on line {self.labels[name][2]}")
            s = self._here()
            self.labels[name] = (s.name, len(s.data), number)
            line = line[m.end():].strip()
        if not line:
            return
        if self._bundle is not None or line.startswith("{"):
            self._bundle_part(number, line)
        elif line.startswith("."):
            self._directive(number, line)
        else:
            self._emit(number, "inst", (line,), 4)

    def _bundle_part(self, number: int, line: str) -> None:
        if self._bundle is None:
            self._bundle, self._bundle_line, line = [], number, line[1:].strip()
        closing = line.endswith("}")
        if closing:
            line = line[:-1].strip()
        self._bundle += [p.strip() for p in line.split(";") if p.strip()]
        if closing:
            parts, self._bundle = self._bundle, None
            if len(parts) != 2:
                raise SyntaxProblem(f"a bundle holds two instructions, not {len(parts)}")
            self._emit(self._bundle_line, "bundle", tuple(parts), 8)

    def _directive(self, number: int, line: str) -> None:
        directive, _, args = line.partition(" ")
        args = args.strip()
        directive = directive.lower()
        if directive in (".text", ".data"):
            address = _address(args) if args else None
            self._current = self._section(directive, "ax" if directive == ".text" else "aw", address)
        elif directive == ".section":
            m = _SECTION.match(args)
            if not m:
                raise SyntaxProblem('.section takes NAME[, "FLAGS"][, ADDRESS]')
            name, flags = m.group(1), m.group(2)
            if flags is None:
                flags = "ax" if name.startswith(".text") else "aw"
            self._current = self._section(name, flags, _address(m.group(3)) if m.group(3) else None)
        elif directive in (".word", ".int", ".long", ".byte"):
            values = tuple(a.strip() for a in args.split(","))
            if directive == ".byte":
                self._emit(number, "bytes", values, len(values))
            else:
                self._emit(number, "words", values, 4 * len(values))
        elif directive in (".align", ".p2align", ".balign"):
            n = parse_number(args)
            if n is None:
                raise SyntaxProblem(f"{directive} takes a number")
            size = 1 << n if directive == ".p2align" else n
            if size <= 0 or size & (size - 1):
                raise SyntaxProblem(f"alignment {size} is not a power of two")
            s = self._here()
            s.align = max(s.align, size)
            pad = -((s.address or 0) + len(s.data)) % size
            self._emit(number, "fill", (str(pad),), pad)
        elif directive in (".globl", ".global"):
            self.globals.update(a.strip() for a in args.split(","))
        elif directive in (".supervisor", ".worker"):
            self._mode = directive == ".supervisor"
        elif directive != ".allow_optimizations":  # LLVM's licence to reorder bundles: taken as written here
            raise SyntaxProblem(f"unknown directive {directive}")

    def _section(self, name: str, flags: str, address: int | None) -> AsmSection:
        s = self.sections.get(name)
        if s is None:
            s = self.sections[name] = AsmSection(name, flags, address)
        elif address is not None and s.address is not None and address != s.address:
            raise SyntaxProblem(f"section {name} is already at {s.address:#x}")
        elif address is not None:
            s.address = address
        return s

    def _here(self) -> AsmSection:
        if self._current is None:
            self._current = self._section(".text", "ax", None)
        return self._current

    def _emit(self, line: int, kind: str, body: tuple[str, ...], size: int) -> None:
        s = self._here()
        self.statements.append(Statement(line, s.name, len(s.data), kind, body, self._mode))
        s.data += bytes(size)


def _address(text: str) -> int:
    value = parse_number(text.strip())
    if value is None or not 0 <= value < 1 << 32:
        raise SyntaxProblem(f"{text.strip()!r} is not an address")
    return value


def _strip_comment(line: str) -> str:
    for mark in ("#", "//"):
        at = line.find(mark)
        if at >= 0:
            line = line[:at]
    return line
