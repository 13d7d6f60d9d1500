# The tile instruction set as data: the table (rows.py, shaped by table.py
# and operands.py), the decoder and encoder it drives, the assembly syntax
# (syntax.py), listings (listing.py) and the assembler (layout.py, assembler.py).
# docs/isa.md describes all of it and cites the facts.
from __future__ import annotations

from ipufs.model.isa.decoder import Bundle, Decoder, Instruction, pairing_problem
from ipufs.model.isa.encoder import encode, encode_bundle, encode_row
from ipufs.model.isa.operands import EncodingError, Kind, Operand
from ipufs.model.isa.rows import ROWS
from ipufs.model.isa.table import Arch, Context, Group, Lane, Row

__all__ = [
    "ROWS", "Arch", "Bundle", "Context", "Decoder", "EncodingError", "Group", "Instruction", "Kind", "Lane",
    "Operand", "Row", "encode", "encode_bundle", "encode_row", "pairing_problem",
]
