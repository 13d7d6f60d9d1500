# Words to instructions, driven by the table (rows.py): an index from the
# word's top byte (co-issue flag and primary opcode) to the few rows that
# can match it, then mask/value and the operand fields. Bit 31 marks the
# two halves of a co-issued pair (Graphcore's LLVM disassembler reads the
# next word when it is set; its assembler sets it on both), except in the
# first word of a two-word instruction (sendpicp, Row.wide), whose second
# word holds operands; pair rules: docs/isa.md, "Bundles".
from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ipufs.model.isa.rows import ROWS
from ipufs.model.isa.table import COISSUE_BIT, Arch, Lane, Row

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction: its row, its operand values in assembly
    order (register numbers, immediates as extended, byte addresses for
    targets) and whether its co-issue flag is set."""

    row: Row
    operands: tuple[int, ...]
    coissue: bool = False

    @property
    def mnemonic(self) -> str:
        return self.row.mnemonic

    @property
    def fields(self) -> dict[int, int]:
        """Operand position → value (the same facts as ``operands``)."""
        return dict(enumerate(self.operands))


@dataclass(frozen=True, slots=True)
class Bundle:
    """A co-issued pair: the main-lane instruction, then the aux-lane one."""

    main: Instruction
    aux: Instruction


def pairing_problem(first: Instruction, second: Instruction) -> str | None:
    """Why two instructions may not form a bundle in this order, or None.

    Both carry the co-issue flag; the first issues to the main pipeline and
    the second to the aux one; some context must be allowed to run both."""
    if not (first.coissue and second.coissue):
        return "both halves of a bundle must have the co-issue bit (31) set"
    if first.row.lane is not Lane.MAIN:
        return f"{first.mnemonic} is an aux-lane instruction: a bundle starts with a main-lane one"
    if second.row.lane is not Lane.AUX:
        return f"{second.mnemonic} is a main-lane instruction: a bundle ends with an aux-lane one"
    if not first.row.context & second.row.context:
        return f"no context may run both {first.mnemonic} and {second.mnemonic}"
    return None


class Decoder:
    """Decodes words for one architecture. Build once; decoding is a list
    index and a few mask tests per word."""

    def __init__(self, arch: Arch = Arch.IPU1, rows: tuple[Row, ...] = ROWS) -> None:
        self.arch = arch
        self.rows = tuple(r for r in rows if r.runs_on(arch))
        # For each value of bits 31..24, the rows whose fixed bits there agree.
        self._by_top: list[tuple[Row, ...]] = [
            tuple(r for r in self.rows if ((top << 24) ^ r.value) & r.mask & 0xFF000000 == 0)
            for top in range(256)
        ]

    @staticmethod
    @functools.cache
    def of(arch: Arch) -> Decoder:
        """The shared decoder of ``arch`` over the whole table (a decoder
        holds no state once built, and building one takes milliseconds: an
        IPU's executor takes this one, so mounting 1024 IPUs builds it once)."""
        return Decoder(arch)

    def candidates(self, word: int) -> tuple[Row, ...]:
        """The rows that may match ``word``, judging by its top byte."""
        return self._by_top[word >> 24]

    def decode(self, word: int) -> Instruction | None:
        """The instruction ``word`` encodes, or None if it is not one (no
        row matches, or a register field is no valid encoding). A two-word
        instruction's second word is bits 63..32 of ``word`` (zero if
        they are not given)."""
        for row in self._by_top[(word >> 24) & 0xFF]:
            if word & row.mask == row.value:
                values = []
                for op in row.operands:
                    v = op.value(op.field(word))
                    if v is None:
                        return None
                    values.append(v)
                return Instruction(row, tuple(values), bool(word & COISSUE_BIT) and row.co_issuable)
        return None

    def wide(self, word: int) -> bool:
        """Whether ``word`` begins a two-word instruction (sendpicp)."""
        inst = self.decode(word & 0xFFFFFFFF) if word & COISSUE_BIT else None
        return inst is not None and inst.row.wide

    def decode_pair(self, first: int, second: int) -> Bundle | str:
        """A bundle from two words, or why they are none."""
        a, b = self.decode(first), self.decode(second)
        if a is None or b is None:
            return f"{(first if a is None else second):#010x} is not an instruction"
        problem = pairing_problem(a, b)
        return problem if problem else Bundle(a, b)

    def decode_bundle(self, value: int) -> Bundle | Instruction | str:
        """A bundle from a 64-bit little-endian pair (the first word in the
        low half, as it lies at the lower address), or the two-word
        instruction they make, or why they are neither."""
        if self.wide(value):
            inst = self.decode(value)
            assert inst is not None, "a two-word instruction's second word is operands only"
            return inst
        return self.decode_pair(value & 0xFFFFFFFF, value >> 32 & 0xFFFFFFFF)

    def classify(self, words: npt.NDArray[np.uint32]) -> npt.NDArray[np.int16]:
        """For each word, the index in ``self.rows`` of the row it decodes
        as, or -1: the decoder over a whole array at numpy speed (a stable
        sort of the top bytes groups the words by candidate rows)."""
        import numpy as np

        words = np.ascontiguousarray(words, dtype=np.uint32)
        out = np.full(words.shape, -1, dtype=np.int16)
        top = (words >> 24).astype(np.uint8)
        order = np.argsort(top, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(top, minlength=256))))
        index = {id(r): i for i, r in enumerate(self.rows)}
        for t in range(256):
            lo, hi = int(bounds[t]), int(bounds[t + 1])
            if lo == hi or not self._by_top[t]:
                continue
            at = order[lo:hi]
            sub = words[at]
            found = np.full(sub.shape, -1, dtype=np.int16)
            for row in self._by_top[t]:
                hit = (sub & np.uint32(row.mask)) == np.uint32(row.value)
                for op in row.operands:
                    if op.kind.is_register and op.kind.name.endswith(("PAIR", "QUAD")):
                        raw = np.zeros(sub.shape, dtype=np.uint32)
                        for p in op.pieces:
                            raw |= ((sub >> np.uint32(p.word_lo)) & np.uint32((1 << p.width) - 1)) << np.uint32(
                                p.value_lo)
                        hit &= _valid_registers(op.kind.name, raw)
                found[hit] = index[id(row)]
            out[at] = found
        return out


def _valid_registers(kind: str, raw: npt.NDArray[np.uint32]) -> npt.NDArray[np.bool_]:
    valid: npt.NDArray[np.bool_]
    if kind == "ARF_QUAD":
        valid = (raw & 3) == 0
    elif kind == "MRF_PAIR":
        valid = ((raw & 1) == 0) & (raw < 12)
    else:
        valid = (raw & 1) == 0
    return valid
