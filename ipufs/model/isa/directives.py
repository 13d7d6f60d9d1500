# What the assembler's directives say, apart from where things go: the
# switches Graphcore's assembler adds (ColossusAsmParser ParseDirective:
# .supervisor/.worker and the leniencies), the sections, and the widths of
# the data directives. docs/isa.md lists them all.
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ipufs.model.isa.syntax import SyntaxProblem, split_operands

_TOGGLES = {
    ".supervisor": ("context", True), ".worker": ("context", False),
    ".allow_invalid_execution_mode": ("any_context", True), ".error_on_invalid_execution_mode": ("any_context", False),
    ".allow_invalid_operands": ("invalid_operands", True), ".error_on_invalid_operands": ("invalid_operands", False),
    ".warn_on_invalid_bundles": ("warn_bundles", True), ".error_on_invalid_bundles": ("warn_bundles", False),
    ".allow_optimizations": ("optimize", True), ".allow_invalid_repeat": ("invalid_repeat", True),
}
_WIDTHS = {".byte": 1, ".short": 2, ".half": 2, ".hword": 2, ".2byte": 2, ".word": 4, ".int": 4, ".long": 4,
           ".4byte": 4, ".quad": 8, ".8byte": 8}
_NAME = re.compile(r"[\w.$]+")


@dataclass(frozen=True, slots=True)
class Flags:
    """The directives in force at a statement: the context it is for
    (.supervisor: True, .worker: False, None: not said), and LLVM's
    leniencies: instructions and CSR names of either context
    (.allow_invalid_execution_mode), operands too wide for their fields
    (.allow_invalid_operands), bundle rules as warnings
    (.warn_on_invalid_bundles), reversed bundles swapped and an
    {rpt; fnop} bundle made a lone rpt where that aligns its body
    (.allow_optimizations), and no rpt body rules (.allow_invalid_repeat)."""

    context: bool | None = None
    any_context: bool = False
    invalid_operands: bool = False
    warn_bundles: bool = False
    optimize: bool = False
    invalid_repeat: bool = False

    def toggled(self, directive: str) -> Flags | None:
        """The flags after ``directive``, or None if it sets none."""
        if directive not in _TOGGLES:
            return None
        name, value = _TOGGLES[directive]
        return replace(self, **{name: value})


@dataclass(frozen=True, slots=True)
class SectionSpec:
    """A section directive: its name, flags ("ax" code, "aw" data, "a"
    read-only, "" not loaded) and address (None: placed after the others)."""

    name: str
    flags: str
    address: int | None


def parse_section(directive: str, args: str, constant: Callable[[str], int]) -> SectionSpec:
    """`.text [ADDR]`, `.data [ADDR]`, or `.section NAME[, "FLAGS"[,
    @TYPE]][, ADDR]`; ``constant`` evaluates an address."""
    if directive in (".text", ".data"):
        address = constant(args) if args else None
        return SectionSpec(directive, "ax" if directive == ".text" else "aw", address)
    parts = split_operands(args)
    name = parts.pop(0) if parts else ""
    if not _NAME.fullmatch(name):
        raise SyntaxProblem('.section takes NAME[, "FLAGS"[, @TYPE]][, ADDRESS]')
    flags = "ax" if name.startswith(".text") else "aw"
    if parts and parts[0].startswith('"'):
        quoted = parts.pop(0)
        if len(quoted) < 2 or not quoted.endswith('"') or not set(quoted[1:-1]) <= set("awx"):
            raise SyntaxProblem(f'section flags {quoted}: write "a", "aw", "ax" or ""')
        flags = quoted[1:-1]
        if parts and parts[0][:1] in ("@", "%"):
            kind = parts.pop(0)[1:]
            if kind not in ("progbits", "nobits"):
                raise SyntaxProblem(f"section type @{kind}: ipufs writes @progbits sections")
    if len(parts) > 1:
        raise SyntaxProblem('.section takes NAME[, "FLAGS"[, @TYPE]][, ADDRESS]')
    return SectionSpec(name, flags, constant(parts[0]) if parts else None)


def data_directive(directive: str) -> int | None:
    """The bytes of each value of a data directive (.byte 1 ... .quad 8),
    or None if ``directive`` is none."""
    return _WIDTHS.get(directive)
