# Instructions to words, driven by the same table as the decoder: the
# row's fixed bits, each operand's value placed in its bit ranges, and the
# co-issue flag. Exact: encode(decode(w)) == w for every word that decodes
# (tests/model/isa/test_codec.py proves it over random words).
from __future__ import annotations

from ipufs.model.isa.decoder import Bundle, Instruction, pairing_problem
from ipufs.model.isa.operands import EncodingError
from ipufs.model.isa.table import COISSUE_BIT, Row


def encode_row(row: Row, operands: tuple[int, ...] | list[int], coissue: bool = False) -> int:
    """The word of ``row`` with these operand values (assembly order): a
    64-bit value, first word low, for a two-word row (Row.wide);
    EncodingError when a value does not fit or the row may not co-issue."""
    if len(operands) != len(row.operands):
        raise EncodingError(f"{row.mnemonic} takes {len(row.operands)} operands, not {len(operands)}")
    if coissue and not row.co_issuable:
        raise EncodingError(f"{row.mnemonic} may not be co-issued")
    word = row.value | (COISSUE_BIT if coissue else 0)
    for op, value in zip(row.operands, operands):
        word |= op.place(op.raw(value))
    return word


def encode(instruction: Instruction) -> int:
    """The word of one instruction (both words of a two-word one)."""
    return encode_row(instruction.row, instruction.operands, instruction.coissue)


def encode_bundle(bundle: Bundle) -> tuple[int, int]:
    """The two words of a co-issued pair (both with bit 31 set)."""
    problem = pairing_problem(bundle.main, bundle.aux)
    if problem:
        raise EncodingError(problem)
    return encode(bundle.main), encode(bundle.aux)
