# The assembler: source text to sections of bytes at addresses and a
# symbol table. The first pass (layout.py) lays statements out; this one
# places the sections, encodes each statement with the syntax of llvm-mc
# for Colossus (syntax.py) and checks rpt bodies. Errors carry the line
# they belong to, and all of them are reported.
from __future__ import annotations

from dataclasses import dataclass

from ipufs.model.isa.decoder import Instruction, pairing_problem
from ipufs.model.isa.encoder import encode_row
from ipufs.model.isa.layout import AsmSection, Layout, Statement
from ipufs.model.isa.syntax import Syntax, SyntaxProblem, parse_number
from ipufs.model.isa.table import Arch, Group, Row
from ipufs.model.profile import PROFILES

#: What .align pads code with: LLVM's nop, setzi $m14, 0 (MCAsmBackend writeNopData).
NOP = 0x19E00000


class AssemblyError(ValueError):
    """Source the assembler refuses; ``problems`` holds every
    ``file:line: problem`` line, the message the first of them."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0])
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Assembled:
    """What the assembler made: sections (in order of first use), symbols
    (name → (section, address)), the global names, the entry address."""

    sections: tuple[AsmSection, ...]
    symbols: dict[str, tuple[str, int]]
    globals: frozenset[str]
    entry: int


class Assembler:
    """Assembles one source file for one architecture."""

    def __init__(self, arch: Arch = Arch.IPU1, filename: str = "<input>") -> None:
        self.arch = arch
        self.filename = filename
        self.base = PROFILES[arch.name.lower()].tile_memory_base  # the first populated address
        self._syntax = {mode: Syntax(arch, mode, strict=True) for mode in (None, True, False)}

    def assemble(self, text: str) -> Assembled:
        """Sections, symbols and entry of ``text``; AssemblyError listing
        every problem found."""
        layout = Layout()
        for number, raw in enumerate(text.splitlines(), 1):
            layout.read(number, raw)
        layout.finish()
        problems = [f"{self.filename}:{line}: {p}" for line, p in layout.problems]
        sections, labels, globals_, statements = layout.sections, layout.labels, layout.globals, layout.statements

        overlaps = self._place(sections)
        symbols = {n: (s, (sections[s].address or 0) + off) for n, (s, off, _) in labels.items()}
        for name in sorted(globals_ - set(labels)):
            problems.append(f"{self.filename}: .globl {name}: no such label")
        encoded: list[list[tuple[Row, list[int]]]] = []
        for st in statements:
            try:
                encoded.append(self._encode(st, sections[st.section], symbols))
            except SyntaxProblem as exc:
                problems.append(f"{self.filename}:{st.line}: {exc}")
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

    def _encode(self, st: Statement, section: AsmSection,
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


def _repeat_body_problems(statements: list[Statement],
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
