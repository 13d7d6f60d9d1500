# Which registers an instruction writes: what Graphcore's assembler checks
# when it refuses a bundle whose two halves write the same register, or
# one a part of the other's pair or quad (ColossusAsmParser ValidateBundle,
# from each instruction's LLVM outputs; MC tests assemble-invalid-bundles.s,
# bundle-register-clashes.s). The outputs follow LLVM's OutOperandList:
# the first register operand of a load or an ALU instruction, both
# destinations of the paced double loads, call's link register, get's and
# uget's destination, and every operand written back (`+=`, `++`, `@`,
# `>>`, brnzdec's counter); stores, branches, put and the accumulate-only
# instructions (*acc, *cmac, *mac) write none.
from __future__ import annotations

from ipufs.model.isa.operands import Kind
from ipufs.model.isa.table import Group, Row

_WIDTH = {Kind.MRF: 1, Kind.ARF: 1, Kind.ARF_PAIR: 2, Kind.MRF_PAIR: 2, Kind.ARF_QUAD: 4}
_TWO_DESTINATIONS = {"ld2x64pace", "ld64a32pace", "ld64b16pace"}
_NO_OUTPUT_SUFFIXES = ("absacc", "sqacc", "cmac", "mac")
_NO_OUTPUT = {"f16v4acc", "f16v8acc", "f32v4acc", "ld64putcs", "ld128putcs"}


def outputs(row: Row) -> tuple[int, ...]:
    """The indices of the operands ``row`` writes."""
    written = {i for i, o in enumerate(row.operands) if o.updated}
    group, name = row.group, row.mnemonic
    first_is_output = bool(row.operands) and row.operands[0].kind.is_register and (
        (group in (Group.LOAD, Group.LOAD_STORE, Group.MAIN_ALU, Group.AUX_ALU) and name not in _NO_OUTPUT
         and not name.endswith(_NO_OUTPUT_SUFFIXES))
        or name in ("call", "get", "uget"))
    if first_is_output:
        written.add(0)
    if name in _TWO_DESTINATIONS:
        written.add(1)
    return tuple(sorted(written))


def written(row: Row, values: list[int] | tuple[int, ...]) -> set[tuple[str, int]]:
    """The registers ``row`` with these operand values writes, one by one
    ("m", n) or ("a", n): a pair as its two registers, a quad as four."""
    out: set[tuple[str, int]] = set()
    for i in outputs(row):
        kind = row.operands[i].kind
        if kind in _WIDTH:
            file = "m" if kind in (Kind.MRF, Kind.MRF_PAIR) else "a"
            out |= {(file, values[i] + k) for k in range(_WIDTH[kind])}
    return out
