# The assembler: source text to sections of bytes at addresses and a
# symbol table, in two passes (every instruction is one 32-bit word and a
# bundle two, so the first pass knows every label's address). The syntax
# is llvm-mc's for Colossus (syntax.py) with the directives of docs/isa.md:
# .text/.data/.section at addresses, .word/.int/.byte, .align, .globl,
# .supervisor/.worker; `#` and `//` comments; bundles `{ a ; b }`, on one
# line or over several. Errors carry the line they belong to.
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ipufs.model.isa.decoder import Instruction, pairing_problem
from ipufs.model.isa.encoder import encode_row
from ipufs.model.isa.syntax import Syntax, SyntaxProblem, parse_number
from ipufs.model.isa.table import Arch, Group, Row
from ipufs.model.profile import PROFILES

#: What .align pads code with: LLVM's nop, setzi $m14, 0 (MCAsmBackend writeNopData).
NOP = 0x19E00000
_LABEL = re.compile(r"\s*([A-Za-z_.][\w.$]*)\s*:(?!\S)")
_SECTION = re.compile(r'([\w.$]+)(?:\s*,\s*"([a-z]*)")?(?:\s*,\s*(\S+))?$')


class AssemblyError(ValueError):
    """Source the assembler refuses; ``problems`` holds every
    ``file:line: problem`` line, the message the first of them."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0])
        self.problems = problems


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


@dataclass(frozen=True, slots=True)
class Assembled:
    """What the assembler made: sections (in order of first use), symbols
    (name → (section, address)), the global names, the entry address."""

    sections: tuple[AsmSection, ...]
    symbols: dict[str, tuple[str, int]]
    globals: frozenset[str]
    entry: int


@dataclass
class _Statement:
    line: int
    section: str
    offset: int
    kind: str  # "inst", "bundle", "words", "bytes", "fill"
    body: tuple[str, ...]
    mode: bool | None


class Assembler:
    """Assembles one source file for one architecture."""

    def __init__(self, arch: Arch = Arch.IPU1, filename: str = "<input>") -> None:
        self.arch = arch
        self.filename = filename
        self.base = PROFILES[arch.name.lower()].tile_window  # the first populated address
        self._syntax = {mode: Syntax(arch, mode, strict=True) for mode in (None, True, False)}

    def assemble(self, text: str) -> Assembled:
        problems: list[str] = []
        sections: dict[str, AsmSection] = {}
        labels: dict[str, tuple[str, int, int]] = {}  # name -> (section, offset, line)
        globals_: set[str] = set()
        statements: list[_Statement] = []
        current: AsmSection | None = None
        mode: bool | None = None
        bundle: list[str] | None = None
        bundle_line = 0

        def fail(line: int, message: str) -> None:
            problems.append(f"{self.filename}:{line}: {message}")

        def section(name: str, flags: str, address: int | None) -> AsmSection:
            s = sections.get(name)
            if s is None:
                s = sections[name] = AsmSection(name, flags, address)
            elif address is not None and s.address is not None and address != s.address:
                raise SyntaxProblem(f"section {name} is already at {s.address:#x}")
            elif address is not None:
                s.address = address
            return s

        def here() -> AsmSection:
            nonlocal current
            if current is None:
                current = section(".text", "ax", None)
            return current

        def emit(line: int, kind: str, body: tuple[str, ...], size: int) -> None:
            s = here()
            statements.append(_Statement(line, s.name, len(s.data), kind, body, mode))
            s.data += bytes(size)

        for number, raw in enumerate(text.splitlines(), 1):
            line = _strip_comment(raw).strip()
            try:
                while True:  # labels, possibly several, before anything else on the line
                    m = _LABEL.match(line)
                    if not m or bundle is not None:
                        break
                    name = m.group(1)
                    if name in labels:
                        raise SyntaxProblem(f"label {name} is already defined on line {labels[name][2]}")
                    s = here()
                    labels[name] = (s.name, len(s.data), number)
                    line = line[m.end():].strip()
                if not line:
                    continue
                if bundle is not None or line.startswith("{"):
                    if bundle is None:
                        bundle, bundle_line, line = [], number, line[1:].strip()
                    closing = line.endswith("}")
                    if closing:
                        line = line[:-1].strip()
                    bundle += [p.strip() for p in line.split(";") if p.strip()]
                    if closing:
                        if len(bundle) != 2:
                            raise SyntaxProblem(f"a bundle holds two instructions, not {len(bundle)}")
                        emit(bundle_line, "bundle", tuple(bundle), 8)
                        bundle = None
                    continue
                if line.startswith("."):
                    directive, _, args = line.partition(" ")
                    args = args.strip()
                    directive = directive.lower()
                    if directive in (".text", ".data"):
                        address = _address(args) if args else None
                        current = section(directive, "ax" if directive == ".text" else "aw", address)
                    elif directive == ".section":
                        m2 = _SECTION.match(args)
                        if not m2:
                            raise SyntaxProblem('.section takes NAME[, "FLAGS"][, ADDRESS]')
                        name, flags = m2.group(1), m2.group(2)
                        if flags is None:
                            flags = "ax" if name.startswith(".text") else "aw"
                        current = section(name, flags, _address(m2.group(3)) if m2.group(3) else None)
                    elif directive in (".word", ".int", ".long"):
                        values = tuple(a.strip() for a in args.split(","))
                        emit(number, "words", values, 4 * len(values))
                    elif directive == ".byte":
                        values = tuple(a.strip() for a in args.split(","))
                        emit(number, "bytes", values, len(values))
                    elif directive in (".align", ".p2align", ".balign"):
                        n = parse_number(args)
                        if n is None:
                            raise SyntaxProblem(f"{directive} takes a number")
                        size = 1 << n if directive == ".p2align" else n
                        if size <= 0 or size & (size - 1):
                            raise SyntaxProblem(f"alignment {size} is not a power of two")
                        s = here()
                        s.align = max(s.align, size)
                        pad = -((s.address or 0) + len(s.data)) % size
                        emit(number, "fill", (str(pad),), pad)
                    elif directive in (".globl", ".global"):
                        for name in (a.strip() for a in args.split(",")):
                            globals_.add(name)
                    elif directive in (".supervisor", ".worker"):
                        mode = directive == ".supervisor"
                    elif directive == ".allow_optimizations":
                        pass  # LLVM's licence to reorder a bundle; bundles here are taken as written
                    else:
                        raise SyntaxProblem(f"unknown directive {directive}")
                    continue
                emit(number, "inst", (line,), 4)
            except SyntaxProblem as exc:
                fail(number, str(exc))
        if bundle is not None:
            fail(bundle_line, "bundle not closed with }")

        overlaps = self._place(sections)
        symbols = {n: (s, (sections[s].address or 0) + off) for n, (s, off, _) in labels.items()}
        for name in sorted(globals_ - set(labels)):
            problems.append(f"{self.filename}: .globl {name}: no such label")
        encoded: list[list[tuple[Row, list[int]]]] = []
        for st in statements:
            try:
                encoded.append(self._encode(st, sections[st.section], symbols))
            except SyntaxProblem as exc:
                fail(st.line, str(exc))
                encoded.append([])
        problems += [f"{self.filename}:{line}: {p}" for line, p in _repeat_body_problems(statements, encoded)]
        if problems or overlaps:
            raise AssemblyError(sorted(problems, key=_line_of) + overlaps)
        text_sections = [s for s in sections.values() if s.code and s.data]
        entry = symbols["_start"][1] if "_start" in symbols else (
            text_sections[0].address if text_sections else self.base)
        return Assembled(tuple(s for s in sections.values() if s.data), symbols, frozenset(globals_),
                         entry or 0)

    def _place(self, sections: dict[str, AsmSection]) -> list[str]:
        """Give sections without an address one after those that have; the
        overlaps found, as problems."""
        end = self.base
        for s in sections.values():
            if s.address is not None:
                end = max(end, s.address + len(s.data))
        for s in sections.values():
            if s.address is None:
                s.address = (end + s.align - 1) // s.align * s.align
                end = s.address + len(s.data)
        spans = sorted((s.address, s.address + len(s.data), s.name) for s in sections.values()
                       if s.data and s.address is not None)
        return [f"{self.filename}: sections {n0} ({a0:#x}-{a1:#x}) and {n1} (from {b0:#x}) overlap"
                for (a0, a1, n0), (b0, _b1, n1) in zip(spans, spans[1:]) if b0 < a1]

    def _encode(self, st: _Statement, section: AsmSection,
                symbols: dict[str, tuple[str, int]]) -> list[tuple[Row, list[int]]]:
        """Write one statement's bytes; the instructions it held."""
        def resolve(name: str) -> int:
            if name not in symbols:
                raise SyntaxProblem(f"undefined symbol {name}")
            return symbols[name][1]

        assert section.address is not None
        address = section.address + st.offset
        syntax = self._syntax[st.mode]
        out: list[int] = []
        held: list[tuple[Row, list[int]]] = []
        if st.kind == "inst":
            if address % 4:
                raise SyntaxProblem(f"instruction at {address:#x} is not 4-byte aligned")
            row, values = syntax.read(st.body[0], resolve)
            out.append(encode_row(row, values))
            held = [(row, values)]
        elif st.kind == "bundle":
            if address % 8:
                raise SyntaxProblem(f"bundle at {address:#x} is not 8-byte aligned (put .align 8 before it)")
            first, second = (syntax.read(t, resolve) for t in st.body)
            problem = pairing_problem(Instruction(first[0], tuple(first[1]), True),
                                      Instruction(second[0], tuple(second[1]), True))
            if problem:
                raise SyntaxProblem(problem)
            out += [encode_row(first[0], first[1], True), encode_row(second[0], second[1], True)]
            held = [first, second]
        elif st.kind == "words":
            for v in st.body:
                value = _data_value(v, resolve, 32)
                out.append(value & 0xFFFFFFFF)
        elif st.kind == "bytes":
            section.data[st.offset:st.offset + len(st.body)] = bytes(_data_value(v, resolve, 8) & 0xFF
                                                                       for v in st.body)
            return []
        else:  # fill: nops in code when whole words, else the zeros already there
            pad = int(st.body[0])
            if not (section.code and pad % 4 == 0 and address % 4 == 0):
                return []
            out = [NOP] * (pad // 4)
        blob = b"".join(w.to_bytes(4, "little") for w in out)
        section.data[st.offset:st.offset + len(blob)] = blob
        return held


def _repeat_body_problems(statements: list[_Statement],
                          encoded: list[list[tuple[Row, list[int]]]]) -> list[tuple[int, str]]:
    """LLVM's rule for `rpt COUNT, SIZE` (MCAsmBackend validateRptBody; G
    rpt_valid_sequences.s): the SIZE + 1 statements after it are bundles
    (8-byte aligned, as every bundle) holding no control or system
    instruction. (line, problem) for each break of it."""
    out: list[tuple[int, str]] = []
    open_bodies: dict[str, tuple[int, int]] = {}  # section -> (bundles still due, line of the rpt)
    for st, held in zip(statements, encoded):
        due = open_bodies.get(st.section)
        if due is not None and not (st.kind == "fill" and st.body == ("0",)):
            left, line = due
            if st.kind != "bundle":
                out.append((st.line, f"the body of the rpt on line {line} holds bundles only"))
            elif any(row.group in (Group.CONTROL, Group.SYSTEM) for row, _ in held):
                out.append((st.line, f"no control or system instruction in the body of the rpt on line {line}"))
            if left > 1:
                open_bodies[st.section] = (left - 1, line)
            else:
                del open_bodies[st.section]
        for row, values in held:
            if row.mnemonic == "rpt":
                open_bodies[st.section] = (values[1] + 1, st.line)
    out += [(line, f"the rpt's body ({left} more bundle{'s' if left > 1 else ''}) runs past the end of its section")
            for left, line in open_bodies.values()]
    return out


def _line_of(problem: str) -> int:
    parts = problem.split(":")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else 0


def _data_value(text: str, resolve: object, bits: int) -> int:
    value = parse_number(text)
    if value is None:
        assert callable(resolve)
        value = int(resolve(text))
    if not -(1 << (bits - 1)) <= value < 1 << bits:
        raise SyntaxProblem(f"{text} does not fit {bits} bits")
    return value


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
