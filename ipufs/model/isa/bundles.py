# The assembler's rules for co-issued pairs and rpt bodies, as Graphcore's
# assembler has them: a bundle is a main-lane instruction then an aux-lane
# one, both co-issuable, writing no register in common (ColossusAsmParser
# ValidateBundle; MC tests assemble-invalid-bundles.s,
# bundle-register-clashes.s); an rpt's body starts 8-byte aligned and is
# SIZE + 1 bundles holding no control or system instruction (MCAsmBackend
# validateRptBody; rpt_valid_sequences.s, rpt_invalid_sequences.s). ipufs
# adds one rule LLVM does not check: a bundle starts 8-byte aligned (the
# tile faults on one that does not: R's MISALIGNED_EXEBUNDLE).
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ipufs.model.isa.decoder import Instruction, pairing_problem
from ipufs.model.isa.table import Group, Row
from ipufs.model.isa.writes import written

Held = Sequence[tuple[Row, list[int]]]


class _Statement(Protocol):
    line: int
    section: str
    offset: int
    kind: str
    body: tuple[str, ...]


class _Section(Protocol):
    address: int | None
    data: bytearray


def bundle_problems(held: Held, address: int) -> list[str]:
    """Why two instructions at ``address`` make no bundle (empty: they do)."""
    (row0, values0), (row1, values1) = held
    out = []
    problem = pairing_problem(Instruction(row0, tuple(values0), True), Instruction(row1, tuple(values1), True))
    if problem:
        out.append(f"invalid instruction in bundle: {problem}")
    for row in (row0, row1):
        if not row.co_issuable:
            out.append(f"{row.mnemonic} cannot be co-issued: not in a bundle")
    clash = written(row0, values0) & written(row1, values1)
    if clash:
        names = ", ".join(f"${f}{n}" for f, n in sorted(clash))
        out.append(f"bundle instructions cannot write to the same register ({names})")
    if address % 8:
        out.append(f"bundle at {address:#x} is not 8-byte aligned (put .align 8 before it)")
    return out


def repeat_body_problems(statements: Sequence[_Statement], encoded: Sequence[Held],
                         sections: Mapping[str, _Section]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(line, problem) for each break of the rpt rules, and (line,
    warning) for a body that runs past the end of its section (LLVM
    accepts one: what follows in memory is the linker's business)."""
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
                size = 4 * len(held)
                address = (sections[st.section].address or 0) + st.offset + size
                if address % 8:
                    hint = "co-issue the rpt with fnop" if size == 4 else "put a nop before the rpt's bundle"
                    out.append((st.line, f"code following the rpt is misaligned ({address:#x}): {hint}, so that "
                                         f"its body starts 8-byte aligned"))
                open_bodies[st.section] = (values[1] + 1, st.line)
    past = [(line, f"the rpt's body ({left} more bundle{'s' if left > 1 else ''}) runs past the end of its section")
            for left, line in open_bodies.values()]
    return out, past
