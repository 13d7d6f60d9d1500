# The operands of a tile instruction: where each lies in the 32-bit word
# (one or more bit ranges), what kind it is (register class, zero- or
# sign-extended immediate, absolute target), how a field becomes a value
# and back, and which fields are not valid encodings (odd register pairs,
# misaligned quads, $m pairs from 12: Graphcore's LLVM disassembler,
# Disassembler/ColossusDisassembler.cpp, and its MC tests reg-pairs.txt,
# reg-quads.txt). docs/isa.md explains the kinds and cites their sources.
from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Kind(enum.Enum):
    """What an operand is; the value is the token rows.py writes."""

    MRF = "m"  # $m0..$m15
    ARF = "a"  # $a0..$a15
    ARF_PAIR = "a2"  # $aN:N+1, N even
    ARF_QUAD = "a4"  # $aN:N+3, N a multiple of 4
    MRF_PAIR = "m2"  # $mN:N+1, N even, below 12
    BROADCAST = "a:B"  # $aN:B, one f32 broadcast to both lanes
    BROADCAST_LOW = "a:BL"  # $aN:BL, the lower f16 half broadcast
    BROADCAST_HIGH = "a:BU"  # $aN:BU, the upper f16 half broadcast
    ZEXT = "zi"  # zero-extended immediate
    SEXT = "si"  # sign-extended immediate
    TOP12 = "iz"  # 12-bit field giving bits 31..20 of the value
    TARGET = "abs"  # absolute code address, field = byte address >> 2
    CSR = "csr"  # lower CSR space (get/put), 0..255
    UPPER_CSR = "ucsr"  # upper CSR space (uget/uput), index within it

    @property
    def is_register(self) -> bool:
        return self in _REGISTERS


_REGISTERS = {Kind.MRF, Kind.ARF, Kind.ARF_PAIR, Kind.ARF_QUAD, Kind.MRF_PAIR,
              Kind.BROADCAST, Kind.BROADCAST_LOW, Kind.BROADCAST_HIGH}
_BROADCAST_SUFFIX = {Kind.BROADCAST: ":B", Kind.BROADCAST_LOW: ":BL", Kind.BROADCAST_HIGH: ":BU"}


class EncodingError(ValueError):
    """An operand value that the field cannot hold, or that is no valid
    register of its class (the message says which and why)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """Bits ``word_lo .. word_lo+width-1`` of the word hold bits
    ``value_lo ..`` of the field."""

    word_lo: int
    width: int
    value_lo: int


@dataclass(frozen=True, slots=True)
class Operand:
    """One operand of a row: its kind, the bit ranges of its field, the
    post-modify mark it prints with (``+=``, ``++``, ``@``, ``>>`` or none)
    and whether the instruction writes it back (a read-modify-write
    operand such as a post-incremented delta, or brnzdec's counter)."""

    kind: Kind
    pieces: tuple[Piece, ...]
    width: int
    mark: str = ""
    updated: bool = False

    @property
    def scale(self) -> int:
        """What the field is multiplied by to give the value: 4 for a
        target (a word address), 1 << 20 for a top-12-bits immediate,
        else 1."""
        return 4 if self.kind is Kind.TARGET else 1 << 20 if self.kind is Kind.TOP12 else 1

    @property
    def mask(self) -> int:
        """The word bits this operand occupies."""
        m = 0
        for p in self.pieces:
            m |= ((1 << p.width) - 1) << p.word_lo
        return m

    def field(self, word: int) -> int:
        """The raw field of ``word``."""
        raw = 0
        for p in self.pieces:
            raw |= ((word >> p.word_lo) & ((1 << p.width) - 1)) << p.value_lo
        return raw

    def place(self, raw: int) -> int:
        """The word bits of a raw field."""
        word = 0
        for p in self.pieces:
            word |= ((raw >> p.value_lo) & ((1 << p.width) - 1)) << p.word_lo
        return word

    def value(self, raw: int) -> int | None:
        """The operand's value for a raw field: a register number, an
        immediate, a byte address; None when the field is no valid
        encoding (an odd pair, a misaligned quad, a $m pair from 12)."""
        kind = self.kind
        if kind is Kind.SEXT:
            sign = 1 << (self.width - 1)
            return (raw ^ sign) - sign
        if kind is Kind.TOP12:
            return raw << 20
        if kind is Kind.TARGET:
            return raw << 2
        if kind is Kind.ARF_PAIR and raw & 1:
            return None
        if kind is Kind.ARF_QUAD and raw & 3:
            return None
        if kind is Kind.MRF_PAIR and (raw & 1 or raw >= 12):
            return None
        return raw

    def raw(self, value: int) -> int:
        """The raw field for a value; EncodingError if it cannot be held."""
        kind, width = self.kind, self.width
        if kind is Kind.SEXT:
            # Either signed, or the field's own unsigned spelling (0xff for -1).
            if not -(1 << (width - 1)) <= value < (1 << width):
                raise EncodingError(f"{value} does not fit a {width}-bit signed immediate")
            return value & ((1 << width) - 1)
        if kind is Kind.TOP12:
            if value & 0xFFFFF or not 0 <= value < 1 << 32:
                raise EncodingError(f"{value:#x} is not a 32-bit value whose low 20 bits are zero")
            return value >> 20
        if kind is Kind.TARGET:
            if value & 3 or not 0 <= value < 1 << (width + 2):
                raise EncodingError(f"target {value:#x} is not a 4-byte aligned address below {1 << (width + 2):#x}")
            return value >> 2
        if not 0 <= value < 1 << width:
            what = "register number" if kind.is_register else f"{width}-bit unsigned immediate"
            raise EncodingError(f"{value} does not fit a {what}")
        if self.value(value) is None:
            rule = {Kind.ARF_PAIR: "an $a pair starts at an even register",
                    Kind.ARF_QUAD: "an $a quad starts at a multiple of 4",
                    Kind.MRF_PAIR: "an $m pair starts at an even register below 12"}[kind]
            raise EncodingError(f"{register_name(kind, value)} is not a valid register: {rule}")
        return value


def register_name(kind: Kind, number: int) -> str:
    """The assembly name of register ``number`` of a register kind."""
    if kind is Kind.MRF:
        return f"$m{number}"
    if kind is Kind.ARF:
        return f"$a{number}"
    if kind is Kind.MRF_PAIR:
        return f"$m{number}:{number + 1}"
    if kind is Kind.ARF_PAIR:
        return f"$a{number}:{number + 1}"
    if kind is Kind.ARF_QUAD:
        return f"$a{number}:{number + 3}"
    return f"$a{number}{_BROADCAST_SUFFIX[kind]}"


#: Other names of registers the assembler accepts (LLVM's register file:
#: ColossusRegisterInfo.td; $m12/$m13 per Graphcore's ISA text).
REGISTER_ALIASES = {
    "$mzero": "$m15", "$azero": "$a15", "$azeros": "$a14:15",
    "$bp": "$m8", "$fp": "$m9", "$lr": "$m10", "$sp": "$m11",
    "$mworker_base": "$m12", "$mvertex_base": "$m13",
}

_REGISTER = re.compile(r"\$(m|a)(\d+)(?::(\d+|BL|BU|B))?")
_PAIR_NAME = re.compile(r"\$ap(\d+)")


def parse_register(text: str) -> tuple[Kind, int] | None:
    """``$m3`` → (MRF, 3), ``$a4:7`` → (ARF_QUAD, 4), ``$a1:BL`` →
    (BROADCAST_LOW, 1), ``$ap2`` → (ARF_PAIR, 4); None for anything else.
    LLVM names pairs $ap0..$ap15 too, and $ap7 and above all stand for
    $a14:15 (Graphcore's MC test reg-pairs.s encodes each as 14)."""
    text = REGISTER_ALIASES.get(text, text)
    pair = _PAIR_NAME.fullmatch(text)
    if pair:
        n = int(pair.group(1))
        return (Kind.ARF_PAIR, min(2 * n, 14)) if n <= 15 else None
    m = _REGISTER.fullmatch(text)
    if not m:
        return None
    cls, first, last = m.group(1), int(m.group(2)), m.group(3)
    if first > 15:
        return None
    if last is None:
        return (Kind.MRF if cls == "m" else Kind.ARF), first
    if last in ("B", "BL", "BU"):
        if cls != "a":
            return None
        return {"B": Kind.BROADCAST, "BL": Kind.BROADCAST_LOW, "BU": Kind.BROADCAST_HIGH}[last], first
    span = int(last) - first
    if cls == "m" and span == 1:
        return Kind.MRF_PAIR, first
    if cls == "a" and span == 1:
        return Kind.ARF_PAIR, first
    if cls == "a" and span == 3:
        return Kind.ARF_QUAD, first
    return None


_SPEC = re.compile(r"([a-z0-9:BLU]+)@([0-9,=-]+)(\+=|\+\+|@|>>)?(\*)?")


def parse_spec(spec: str) -> Operand:
    """An operand from its table form ``kind@hi-lo[,hi-lo=vlo...][mark][*]``
    (rows.py): ``m@23-20``, ``si@19-16,3-0=4``, ``m@15-12+=*``."""
    m = _SPEC.fullmatch(spec)
    if not m:
        raise ValueError(f"bad operand spec {spec!r}")
    kind = Kind(m.group(1))
    pieces = []
    for part in m.group(2).split(","):
        bits, _, vlo = part.partition("=")
        hi, _, lo = bits.partition("-")
        lo_bit = int(lo or hi)
        pieces.append(Piece(lo_bit, int(hi) - lo_bit + 1, int(vlo or 0)))
    width = max(p.value_lo + p.width for p in pieces)
    if kind is Kind.ARF_QUAD and pieces[0].value_lo:  # the low field bits are implied zero
        width = 4
    return Operand(kind, tuple(pieces), width, m.group(3) or "", bool(m.group(4)))
