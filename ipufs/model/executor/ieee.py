# IEEE 754 binary32 and binary16 arithmetic as a worker's floating point
# does it, on bit patterns: the values, the special values (NaN, ±∞, ±0,
# subnormals), rounding to nearest even, and the flags each operation
# raises, in $FP_STS's layout. Pure: bits in, (bits, flags) out; fp.py
# puts them in registers and CSRs, native/src/executor.c does the same for
# its f32 and f16 forms.
#
# Sources (keys as in docs/execution.md): half and float are IEEE 16- and
# 32-bit (W: Poplar's supported types; A hover: "IEEE 754-2008").
# Poplar's FloatingPointBehaviour (poplar-api, CSRFunctions.hpp) says what
# raises INV: ∞ − ∞, 0/0, ∞/∞, 0 × ∞, a real operation with a complex
# result (a negative square root), any operation with a NaN operand, any
# comparison with one; and that with NANOO a half-precision overflow gives
# NaN and sets INV "rather than saturating to the half precision max/min
# value" (so without NANOO it saturates; TensorFlow's IPU guide: "clipping
# or generating a NaN"; poplibs gelu clears OFLO and NANOO "to allow
# saturation"). IEEE 754-2008 §7 gives the rest: DIV0 for a finite non-zero
# number over zero, OFLO when a rounded result passes the largest finite
# one (binary32: ±∞), exact results from infinite operands, gradual
# underflow (subnormal results; $FP_STS has no underflow flag). Compares
# with a NaN are false except "not equal" (G llvm/test/CodeGen/Colossus/
# f32-comparisons.ll: `fcmp ord` is `f32cmpeq x, x` and `fcmp uno` is
# `f32cmpne x, x`). max/min are maxNum/minNum (J: llvm.maxnum is f32max):
# the number when one operand is NaN; of +0 and -0, +0 is the larger (IEEE
# 754-2019 maximumNumber: inferred, 2008 leaves it open). clamp passes a
# NaN through (L: popfloat CastToGfloat32.S, "Nans will propagate").
#
# Ours, where no source says: the NaN an operation gives is its first NaN
# operand (in assembly order), quieted (the fraction's top bit set: IEEE
# §6.2.1, and popfloat's QNAN tests) with its sign and the top of its
# payload (IEEE §6.2.3 recommends keeping the payload); an invalid
# operation without a NaN operand gives the positive quiet NaN with no
# other fraction bit (0x7fc00000, 0x7e00), and so does a NANOO overflow.
from __future__ import annotations

import math
import operator
import struct
from collections.abc import Callable
from dataclasses import dataclass

#: $FP_STS flags and $FP_CTL enables (R ipu1_consts.c: CSR_W_FP_STS__INV/DIV0/OFLO, bits 0, 1, 2)
INV, DIV0, OFLO = 1 << 0, 1 << 1, 1 << 2
#: $FP_CTL's rounding mode, stochastic rounding and NaN-on-overflow (R: CSR_W_FP_CTL__RND [18:16], ESR 19, NANOO 20)
RND, ESR, NANOO = 0x7 << 16, 1 << 19, 1 << 20


class Unknown(Exception):
    """The result is not public. ``flags``: the flags the operation raises
    whatever its result (an enabled one stops it first); None: not known."""

    def __init__(self, why: str, flags: int | None = None) -> None:
        super().__init__(why)
        self.flags = flags


@dataclass(frozen=True, slots=True)
class Format:
    """An IEEE binary format as the $a registers hold it."""

    name: str
    bits: int
    mantissa: int  # stored fraction bits
    packer: struct.Struct  # binary64 -> this format, to nearest even (OverflowError past the largest)
    saturates: bool  # overflow gives the largest finite, or NaN with NANOO (Poplar: half precision)
    sign: int
    infinity: int
    quiet: int  # the fraction's top bit: set in a quiet NaN
    largest: int  # the largest finite number
    ones: int  # a true compare's lane

    @classmethod
    def of(cls, name: str, bits: int, mantissa: int, code: str, saturates: bool) -> Format:
        sign = 1 << (bits - 1)
        infinity = (sign - 1) & ~((1 << mantissa) - 1)
        return cls(name, bits, mantissa, struct.Struct("<" + code), saturates, sign, infinity,
                   1 << (mantissa - 1), infinity - 1, (1 << bits) - 1)

    @property
    def default_nan(self) -> int:
        return self.infinity | self.quiet

    def is_nan(self, x: int) -> bool:
        return x & (self.sign - 1) > self.infinity

    def value(self, x: int) -> float:
        v: float = self.packer.unpack(x.to_bytes(self.bits // 8, "little"))[0]
        return v

    def pack(self, value: float) -> int:
        """``value``'s bits, rounded to nearest even; OverflowError past the largest finite."""
        return int.from_bytes(self.packer.pack(value), "little")

    def infinite(self, negative: bool) -> int:
        return self.infinity | (self.sign if negative else 0)


F32 = Format.of("f32", 32, 23, "f", saturates=False)
F16 = Format.of("f16", 16, 10, "e", saturates=True)


def nan_to(src: Format, dst: Format, x: int) -> int:
    """NaN ``x`` of ``src`` as a quiet NaN of ``dst``: its sign and the top of its payload."""
    fraction = x & ((1 << src.mantissa) - 1)
    shift = src.mantissa - dst.mantissa
    fraction = fraction >> shift if shift >= 0 else fraction << -shift
    return (dst.sign if x & src.sign else 0) | dst.infinity | dst.quiet | fraction


def rounded(dst: Format, r: float, ctl: int) -> tuple[int, int]:
    """``r`` (binary64, not NaN) rounded to ``dst``: an infinity is exact; a
    finite value is rounded to nearest even ($FP_CTL.RND 0: inferred), and
    past the largest it overflows (binary32: ±∞; binary16: the largest
    finite of its sign, or with NANOO a NaN and INV)."""
    if math.isinf(r):
        return dst.infinite(r < 0), 0
    if ctl & RND:
        raise Unknown("the rounding mode encoding of $FP_CTL.RND")
    if ctl & ESR:
        raise Unknown("stochastic rounding")
    try:
        return dst.pack(r), 0
    except OverflowError:
        if not dst.saturates:
            return dst.infinite(r < 0), OFLO
        if ctl & NANOO:
            return dst.default_nan, OFLO | INV
        return dst.largest | (dst.sign if r < 0 else 0), OFLO


_ARITH: dict[str, Callable[[float, float], float]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}


def arith(op: str, src: Format, dst: Format, x: int, y: int, ctl: int) -> tuple[int, int]:
    """x ``op`` y (add, sub, mul, div) of two ``src`` numbers, to ``dst``:
    the binary64 result, rounded once (correct for these operations, as
    binary64 has more than twice the precision plus two)."""
    if src.is_nan(x) or src.is_nan(y):
        return nan_to(src, dst, x if src.is_nan(x) else y), INV
    a, b = src.value(x), src.value(y)
    if op == "div" and b == 0:
        if a == 0:
            return dst.default_nan, INV
        negative = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        return dst.infinite(negative), 0 if math.isinf(a) else DIV0
    if op == "div" and math.isinf(a) and math.isinf(b):
        return dst.default_nan, INV
    r = _ARITH[op](a, b)
    if math.isnan(r):  # ∞ − ∞ or 0 × ∞ (no NaN operand gets here)
        return dst.default_nan, INV
    return rounded(dst, r, ctl)


def sqrt(fmt: Format, x: int, ctl: int) -> tuple[int, int]:
    """The square root: of -0, -0; of a number below zero, NaN and INV."""
    if fmt.is_nan(x):
        return x | fmt.quiet, INV
    a = fmt.value(x)
    if a < 0:
        return fmt.default_nan, INV
    return rounded(fmt, math.sqrt(a), ctl)


def compare(test: Callable[[float, float], bool], fmt: Format, x: int, y: int) -> tuple[bool, int]:
    """``test`` (an IEEE relation: false with a NaN, `!=` true) and INV for a NaN operand."""
    flags = INV if fmt.is_nan(x) or fmt.is_nan(y) else 0
    return test(fmt.value(x), fmt.value(y)), flags


def extremum(fmt: Format, x: int, y: int, larger: bool) -> tuple[int, int]:
    """maxNum (``larger``) or minNum: the number when one operand is NaN;
    of +0 and -0, +0 is the larger. Exact: one operand's bits."""
    x_nan, y_nan = fmt.is_nan(x), fmt.is_nan(y)
    if x_nan or y_nan:
        return (x | fmt.quiet if x_nan and y_nan else y if x_nan else x), INV
    a, b = fmt.value(x), fmt.value(y)
    if a == b:  # the same number, or zeros: x & y keeps a +0, x | y a -0
        return (x & y if larger else x | y), 0
    return (x if (a > b) == larger else y), 0


def clamp(fmt: Format, x: int, low: int, high: int) -> tuple[int, int]:
    """min(max(x, low), high), a NaN x passing through quieted; which value
    a NaN bound gives is not public."""
    if fmt.is_nan(x):
        return x | fmt.quiet, INV
    if fmt.is_nan(low) or fmt.is_nan(high):
        raise Unknown("the result of clamp with a NaN bound", INV)
    return extremum(fmt, extremum(fmt, x, low, True)[0], high, False)[0], 0


def convert(src: Format, dst: Format, x: int, ctl: int) -> tuple[int, int]:
    """``x`` to ``dst``: widening is exact, narrowing rounds (and may overflow)."""
    if src.is_nan(x):
        return nan_to(src, dst, x), INV
    if dst.mantissa > src.mantissa:
        return dst.pack(src.value(x)), 0
    return rounded(dst, src.value(x), ctl)


#: f32int's immediate (J ColossusInstrInfo.td TFPU_ROUND_*): even, +inf, -inf, zero, away
_INTEGRAL: tuple[Callable[[float], int], ...] = (
    round,  # half to even
    math.ceil,
    math.floor,
    math.trunc,
    lambda v: int(math.copysign(math.floor(abs(v) + 0.5), v)),
)


def integral(x: int, mode: int) -> tuple[int, int]:
    """f32int: ``x`` rounded to an integral binary32 as ``mode`` says; a zero
    keeps the operand's sign, infinities are exact (IEEE roundToIntegral)."""
    if mode >= len(_INTEGRAL):
        raise Unknown(f"f32int rounding mode {mode}")
    if F32.is_nan(x):
        return x | F32.quiet, INV
    a = F32.value(x)
    if math.isinf(a):
        return x, 0
    return F32.pack(math.copysign(float(_INTEGRAL[mode](a)), a)), 0


def to_integer(x: int, signed: bool, ctl: int) -> tuple[int, int]:
    """f32toi32, f32toui32: rounded as $FP_CTL.RND says (0: to nearest even).
    A NaN, an infinity or a value outside the integer's range is an invalid
    operation (IEEE §5.8); which integer it gives is not public."""
    kind = "signed" if signed else "unsigned"
    if F32.is_nan(x) or x & (F32.sign - 1) == F32.infinity:
        raise Unknown(f"the {kind} integer a NaN or an infinity converts to", INV)
    if ctl & (RND | ESR):
        raise Unknown("the rounding mode encoding of $FP_CTL.RND" if ctl & RND else "stochastic rounding")
    n = round(F32.value(x))
    low, high = (-(1 << 31), (1 << 31) - 1) if signed else (0, (1 << 32) - 1)
    if not low <= n <= high:
        raise Unknown(f"the {kind} integer {F32.value(x)!r} converts to", INV)
    return n & 0xFFFFFFFF, 0


def from_integer(n: int, ctl: int) -> tuple[int, int]:
    """f32fromi32, f32fromui32: ``n`` rounded to binary32."""
    return rounded(F32, float(n), ctl)
