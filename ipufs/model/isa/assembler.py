# The assembler: source text to sections of bytes at addresses and a
# symbol table, as Graphcore's llvm-mc for Colossus reads it (its MC tests
# are ours: tests/model/isa/data/llvm-mc). The first pass (layout.py) lays
# statements out; this one places the sections, resolves symbols, encodes
# each statement (syntax.py), and checks bundles (bundles.py) and rpt
# bodies. Errors carry the line they belong to, and all are reported;
# warnings do not stop the output.
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ipufs.model.isa.bundles import bundle_problems, repeat_body_problems
from ipufs.model.isa.directives import Flags
from ipufs.model.isa.encoder import encode_row
from ipufs.model.isa.expressions import ExpressionProblem, evaluate, parse
from ipufs.model.isa.layout import AsmSection, Layout, Statement
from ipufs.model.isa.syntax import Scope, Syntax, SyntaxProblem
from ipufs.model.isa.table import COISSUE_BIT, Arch, Lane, Row
from ipufs.model.profile import PROFILES

#: What .align pads code with: LLVM's nop, setzi $m14, 0 (MCAsmBackend writeNopData).
NOP = 0x19E00000
#: No byte of any tile lies at or past this address: the end of the
#: largest profile's tile memory. Sections, alignments and sizes are
#: bounded by it.
TILE_MEMORY_END = max(p.tile_window + p.sram_per_tile for p in PROFILES.values())


@cache
def _strict_syntax(arch: Arch, supervisor: bool | None) -> Syntax:
    """One reader per architecture and context (it only reads once made,
    and making one sorts the whole table: a few ms)."""
    return Syntax(arch, supervisor, strict=True)


class AssemblyError(ValueError):
    """Source the assembler refuses; ``problems`` holds every
    ``file:line: problem`` line, the message the first of them."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0])
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Assembled:
    """What the assembler made: sections (in order of first use), symbols
    (name → (section, address)), the global names, the entry address, and
    warnings (``file:line: warning: ...``)."""

    sections: tuple[AsmSection, ...]
    symbols: dict[str, tuple[str, int]]
    globals: frozenset[str]
    entry: int
    warnings: tuple[str, ...] = ()


Encoded = list[tuple[Row, list[int]]]


class Assembler:
    """Assembles one source file for one architecture; ``context`` is the
    context to assume before any .supervisor/.worker (llvm-mc's default is
    a worker's, -mattr=+supervisor a supervisor's; None: either, ipufs's
    default); ``defined``: symbols set before the first line (--defsym)."""

    def __init__(self, arch: Arch = Arch.IPU1, filename: str = "<input>", context: bool | None = None,
                 defined: dict[str, int] | None = None) -> None:
        self.arch = arch
        self.filename = filename
        self.context = context
        self.defined = defined or {}
        self.base = PROFILES[arch.name.lower()].tile_memory_base  # the first populated address
        self._syntax = {mode: _strict_syntax(arch, mode) for mode in (None, True, False)}
        self._lenient_alignment = False

    def assemble(self, text: str) -> Assembled:
        """Sections, symbols and entry of ``text``; AssemblyError listing
        every problem found."""
        layout = Layout(TILE_MEMORY_END, Flags(context=self.context), self.defined)
        layout.read(text)
        self._lenient_alignment = layout.flags.invalid_repeat
        problems = [(line, p) for line, p in layout.problems]
        warnings = list(layout.warnings)
        sections, statements = layout.sections, layout.statements
        overlaps = self._place(sections)
        symbols = _Symbols(layout, sections)
        for name in sorted(layout.globals - set(layout.labels)):
            problems.append((0, f".globl {name}: no such label"))
        encoded: list[Encoded] = []
        for st in statements:
            try:
                encoded.append(self._encode(st, sections[st.section], symbols, warnings))
            except (SyntaxProblem, ExpressionProblem) as exc:
                problems.append((st.line, str(exc)))
                encoded.append([])
        if not layout.flags.invalid_repeat:  # .allow_invalid_repeat anywhere: none of these rules
            body, past_end = repeat_body_problems(statements, encoded, sections)
            problems += body
            warnings += past_end
        if problems or overlaps:
            raise AssemblyError([self._where(line, p) for line, p in sorted(problems, key=lambda lp: lp[0])]
                                + overlaps)
        placed = {n: (s, (sections[s].address or 0) + off) for n, (s, off, _) in layout.labels.items()
                  if not n.startswith(".L")}
        code = [s for s in sections.values() if s.code and s.data]
        entry = placed["_start"][1] if "_start" in placed else (code[0].address if code else self.base)
        return Assembled(tuple(s for s in sections.values() if s.data), placed, frozenset(layout.globals),
                         entry or 0, tuple(self._where(line, f"warning: {w}") for line, w in warnings))

    def _where(self, line: int, problem: str) -> str:
        return f"{self.filename}:{line}: {problem}" if line else f"{self.filename}: {problem}"

    def _place(self, sections: dict[str, AsmSection]) -> list[str]:
        """Give loaded sections without an address one after those that
        have one (sections not loaded lie at 0); the overlaps found, and
        sections past the end of tile memory, as problems."""
        end = self.base
        for s in sections.values():
            if s.address is not None and s.loaded:
                end = max(end, s.address + len(s.data))
        for s in sections.values():
            if s.address is None:
                s.address = (end + s.align - 1) // s.align * s.align if s.loaded else 0
                end = s.address + len(s.data) if s.loaded else end
        out = [f"{self.filename}: section {s.name} ({s.address:#x}-{s.address + len(s.data):#x}) lies past the end "
               f"of tile memory ({TILE_MEMORY_END:#x})" for s in sections.values()
               if s.address is not None and s.address + len(s.data) > TILE_MEMORY_END]
        spans = sorted((s.address, s.address + len(s.data), s.name) for s in sections.values()
                       if s.data and s.address is not None and s.loaded)
        return out + [f"{self.filename}: sections {n0} ({a0:#x}-{a1:#x}) and {n1} (from {b0:#x}) overlap"
                      for (a0, a1, n0), (b0, _b1, n1) in zip(spans, spans[1:]) if b0 < a1]

    def _syntax_for(self, flags: Flags) -> Syntax:
        return self._syntax[None] if flags.any_context else self._syntax[flags.context]

    def _encode(self, st: Statement, section: AsmSection, symbols: _Symbols,
                warnings: list[tuple[int, str]]) -> Encoded:
        """Write one statement's bytes; the instructions it held."""
        assert section.address is not None
        address = section.address + st.offset
        scope = symbols.scope(st.position, address)
        syntax = self._syntax_for(st.flags)
        lenient = st.flags.invalid_operands
        out: list[int] = []
        held: Encoded = []
        if st.kind == "inst":
            if address % 4:
                raise SyntaxProblem(f"instruction at {address:#x} is not 4-byte aligned")
            row, values = syntax.read(st.body[0], scope, lenient)
            word = encode_row(row, values)
            if row.wide:
                if address % 8:
                    raise SyntaxProblem(f"{row.mnemonic} at {address:#x} is not 8-byte aligned (put .align 8 "
                                        f"before it): it is one instruction of two words")
                out += [word & 0xFFFFFFFF, word >> 32]
            else:
                out.append(word)
            held = [(row, values)]
        elif st.kind == "bundle":
            held = [syntax.read(t, scope, lenient) for t in st.body]
            if st.flags.optimize and held[0][0].lane is Lane.AUX and held[1][0].lane is Lane.MAIN:
                held.reverse()  # .allow_optimizations: LLVM swaps a reversed pair
            found = bundle_problems(held, address)
            tolerated = [p for p in found if st.flags.warn_bundles or (self._lenient_alignment and "aligned" in p)]
            if len(tolerated) < len(found):
                raise SyntaxProblem("; ".join(found))
            warnings += [(st.line, p) for p in tolerated]
            out += [encode_row(row, values) | COISSUE_BIT for row, values in held]
        elif st.kind == "data":
            blob = b"".join(_data(v, scope, st.width) for v in st.body)
            section.data[st.offset:st.offset + len(blob)] = blob
            return []
        elif st.kind == "space":
            fill, size = int(st.body[0]), int(st.body[1])
            section.data[st.offset:st.offset + size] = bytes([fill]) * size
            return []
        else:  # fill: nops in code when whole words, else the zeros already there
            pad = int(st.body[0])
            if not (section.code and pad % 4 == 0 and address % 4 == 0):
                return []
            out = [NOP] * (pad // 4)
        blob = b"".join(w.to_bytes(4, "little") for w in out)
        section.data[st.offset:st.offset + len(blob)] = blob
        return held


class _Symbols:
    """Symbol values after placement: labels at their addresses, `.set`
    names at their expressions' values (as of the line that reads them
    when they were constants by then)."""

    def __init__(self, layout: Layout, sections: dict[str, AsmSection]) -> None:
        self.layout = layout
        self.sections = sections
        self._evaluating: set[str] = set()

    def scope(self, position: int, here: int) -> Scope:
        def known(name: str) -> bool:
            return self._assignment(name, position) is not None

        def values(name: str) -> int:
            early = self._assignment(name, position)
            return early if early is not None else self.final(name)
        return Scope(values, known, here)

    def _assignment(self, name: str, position: int) -> int | None:
        """The constant value ``name`` was set to before ``position``."""
        before = [a for a in self.layout.sets.get(name, ()) if a.position <= position]
        return before[-1].value if before else None

    def final(self, name: str) -> int:
        if name in self.layout.labels:
            section, offset, _ = self.layout.labels[name]
            return (self.sections[section].address or 0) + offset
        sets = self.layout.sets.get(name)
        if not sets:
            raise KeyError(name)
        last = sets[-1]
        if last.value is not None:
            return last.value
        if name in self._evaluating:
            raise SyntaxProblem(f"{name} is set in terms of itself")
        self._evaluating.add(name)
        try:
            return evaluate(last.expr, self.final, None)
        finally:
            self._evaluating.discard(name)


def _data(text: str, scope: Scope, width: int) -> bytes:
    """One value of a data directive, ``width`` bytes little-endian."""
    def symbol(name: str) -> int:
        try:
            return scope.values(name)
        except KeyError:
            raise SyntaxProblem(f"undefined symbol {name}") from None
    value = evaluate(parse(text), symbol, scope.here)
    bits = 8 * width
    if not -(1 << (bits - 1)) <= value < 1 << bits:
        raise SyntaxProblem(f"{text} does not fit {bits} bits")
    return (value & ((1 << bits) - 1)).to_bytes(width, "little")

