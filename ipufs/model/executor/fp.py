# Semantics of the floating point a worker runs on $a: f32 scalars, f32v2,
# f16v2 and f16v4 vectors (lane by lane), conversions between f32, f16 and
# integers. Formats are IEEE binary32/binary16 (W's ABI page; A hover).
# Results are rounded to nearest even: the exact binary64 result of binary32
# (or binary16) operands, rounded once to the format, is the correctly
# rounded result for add, sub, mul, div and sqrt. $FP_STS gets INV/DIV0/OFLO
# and an enabled one in $FP_CTL raises ETYPE FP (R TEXCPT_FP; A
# hover/$FP_STS.md). Compares give all ones (true) or zero per lane (J
# ColossusISelLowering.cpp: "all zeros/ones predicates"); max/min are IEEE
# maxNum/minNum (J's fmaxnum/fminnum patterns); clamp is min(max(x, lo), hi)
# with the bounds low element first (A "min-of-maximum"; Graphcore's poplibs
# Cast passes {lower, upper}); f32int's immediate is J's TFPU_ROUND_* enum.
# What the public record leaves open faults as NOT_EXECUTABLE rather than
# guess: NaN, infinite or subnormal operands, subnormal or NaN results,
# which zero max/min of +0 and -0 gives, out-of-range integer conversions,
# a non-zero $FP_CTL.RND (its encoding is not stated; 0 is taken as
# round-to-nearest-even: ours), stochastic rounding (ESR) and NANOO.
from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor.rule import Handler, Rule, s32
from ipufs.model.executor.state import Etype, TileFault

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

FP_STS, FP_CTL = 0, 2
INV, DIV0, OFLO = 1 << 0, 1 << 1, 1 << 2
RND_MASK, ESR, NANOO = 0x7 << 16, 1 << 19, 1 << 20


@dataclass(frozen=True, slots=True)
class Format:
    """An IEEE binary format as the $a registers hold it."""

    name: str
    packer: struct.Struct  # value <-> bytes, rounding to nearest even
    bits: int
    min_normal: float

    mantissa: int  # stored fraction bits

    @property
    def infinity(self) -> int:
        """+infinity's bits: every exponent bit set, fraction 0."""
        return ((1 << (self.bits - 1)) - 1) & ~((1 << self.mantissa) - 1)

    @property
    def sign(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def ones(self) -> int:
        """A true compare's lane: every bit set."""
        return (1 << self.bits) - 1


F32 = Format("f32", struct.Struct("<f"), 32, 2.0 ** -126, 23)
F16 = Format("f16", struct.Struct("<e"), 16, 2.0 ** -14, 10)

#: f32int's immediate (J ColossusInstrInfo.td, TFPU_ROUND_*): even, +inf, -inf, zero, away
_ROUNDINGS: tuple[Callable[[float], int], ...] = (
    round,  # half to even
    math.ceil,
    math.floor,
    math.trunc,
    lambda x: int(math.copysign(math.floor(abs(x) + 0.5), x)),
)


def _not_public(c: Context, why: str) -> TileFault:
    return TileFault(Etype.INVALID_OP, ExceptionCause.NOT_EXECUTABLE, c.pc, f"floating point: {why} is not public")


def _operand(c: Context, bits: int, fmt: Format = F32) -> float:
    value: float = fmt.packer.unpack(bits.to_bytes(fmt.bits // 8, "little"))[0]
    if not math.isfinite(value):
        raise _not_public(c, "an operation on NaN or infinity")
    if value != 0 and abs(value) < fmt.min_normal:
        raise _not_public(c, "an operation on subnormals")
    return value


def _flag(c: Context, flag: int, what: str) -> None:
    """Set a sticky $FP_STS flag; raise the exception if $FP_CTL enables it."""
    c.upper[FP_STS] = c.upper[FP_STS] | flag
    if c.upper[FP_CTL] & flag:
        raise TileFault(Etype.FP, ExceptionCause.FLOATING_POINT, c.pc, what)


def _mode(c: Context) -> None:
    ctl = c.upper[FP_CTL]
    if ctl & RND_MASK:
        raise _not_public(c, "the rounding mode encoding of $FP_CTL.RND")
    if ctl & ESR:
        raise _not_public(c, "stochastic rounding")


def _exact(fmt: Format, value: float) -> int:
    """The bits of ``value``, which ``fmt`` represents exactly."""
    return int.from_bytes(fmt.packer.pack(value), "little")


def _result(c: Context, exact: float, fmt: Format = F32) -> int:
    """``exact`` (a binary64) rounded to ``fmt``'s bits; one that rounds
    past the format's largest value overflows to infinity (IEEE: inferred)."""
    _mode(c)
    if math.isinf(exact):  # division by zero, flagged by the caller
        return fmt.infinity | (fmt.sign if exact < 0 else 0)
    if exact != 0 and abs(exact) < fmt.min_normal:
        raise _not_public(c, "a subnormal result (flush or keep)")
    try:
        return _exact(fmt, exact)
    except OverflowError:  # struct rounds to nearest even first, then refuses infinity
        if c.upper[FP_CTL] & NANOO:
            raise _not_public(c, "overflow with NANOO") from None
        _flag(c, OFLO, f"{fmt.name} overflow")
        return fmt.infinity | (fmt.sign if exact < 0 else 0)


def _read_lanes(c: Context, reg: int, fmt: Format, lanes: int, form: str) -> list[int]:
    """A source's lanes: ``form`` n (as is), t ($aN:B, one f32 to every
    lane), l/u ($aN:BL/:BU, the lower/upper f16 half to every lane)."""
    if fmt is F32:
        return [c.a[reg]] * lanes if form == "t" else [c.a[reg + i] for i in range(lanes)]
    if form in ("l", "u"):
        return [(c.a[reg] >> (16 if form == "u" else 0)) & 0xFFFF] * lanes
    return [(c.a[reg + i // 2] >> (16 * (i % 2))) & 0xFFFF for i in range(lanes)]


def _write_lanes(c: Context, reg: int, fmt: Format, values: list[int]) -> None:
    if fmt is F32:
        for i, v in enumerate(values):
            c.set_a(reg + i, v)
    else:
        for i in range(0, len(values), 2):
            c.set_a(reg + i // 2, values[i] | values[i + 1] << 16)


def _lanes(c: Context, reg: int, fmt: Format, lanes: int, form: str = "n") -> list[float]:
    return [_operand(c, v, fmt) for v in _read_lanes(c, reg, fmt, lanes, form)]


#: one lane of a binary operation: (context, x, y, format) -> the lane's bits
LaneOp = Callable[["Context", float, float, Format], int]
Op = Callable[["Context", float, float], float]


def _rounded(op: Op) -> LaneOp:
    """An arithmetic lane: the exact result, rounded once."""
    def lane(c: Context, x: float, y: float, fmt: Format) -> int:
        return _result(c, op(c, x, y), fmt)
    return lane


def _exactly(op: Op) -> LaneOp:
    """A lane whose result is one of its operands (or its magnitude)."""
    def lane(c: Context, x: float, y: float, fmt: Format) -> int:
        return _exact(fmt, op(c, x, y))
    return lane


def _compare(test: Callable[[float, float], bool]) -> LaneOp:
    def lane(c: Context, x: float, y: float, fmt: Format) -> int:
        return fmt.ones if test(x, y) else 0
    return lane


def _vector(fmt: Format, lanes: int, form: str, lane: LaneOp) -> Handler:
    """Lane by lane (a scalar is one lane; J: broadcast forms by the
    variant's last letter; lane order low half / low register first)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        xs, ys = _lanes(c, o[1], fmt, lanes, form), _lanes(c, o[2], fmt, lanes)
        _write_lanes(c, o[0], fmt, [lane(c, x, y, fmt) for x, y in zip(xs, ys)])
    return run


def _clamp(fmt: Format, lanes: int) -> Handler:
    """min(max(x, lo), hi) per lane; the bounds are the two elements of
    the last operand (a pair of f32, or the halves of one register)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        lo, hi = _lanes(c, o[2], fmt, 2)
        _write_lanes(c, o[0], fmt, [_exact(fmt, _min(c, _max(c, x, lo), hi)) for x in _lanes(c, o[1], fmt, lanes)])
    return run


def _lateral(target: Format, pairs: int, lane: LaneOp) -> Handler:
    """f16 lanes combined two by two (lanes 0 and 1, then 2 and 3) into
    ``target`` lanes: f16v2sum, f16v4sum (to f32), f16v4maxc (to f16)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        xs = _lanes(c, o[1], F16, 2 * pairs)
        _write_lanes(c, o[0], target, [lane(c, xs[2 * i], xs[2 * i + 1], target) for i in range(pairs)])
    return run


def _unary(fmt: Format, op: Callable[[Context, float], int]) -> Handler:
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_a(o[0], op(c, _operand(c, c.a[o[1]], fmt)))
    return run


def _convert(source: Format, target: Format, lanes: int, duplicate: bool = False) -> Handler:
    """Each lane of ``source`` converted to ``target``, rounded to nearest
    even (f16 → f32 is exact); f32tof16 writes its half to both halves."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        values = [_result(c, v, target) for v in _lanes(c, o[1], source, lanes)]
        _write_lanes(c, o[0], target, values * 2 if duplicate else values)
    return run


def _from_int(signed: bool) -> Handler:
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        v = c.a[o[1]]
        c.set_a(o[0], _result(c, float(s32(v) if signed else v)))
    return run


def _to_int(signed: bool) -> Callable[[Context, float], int]:
    """f32toi32/f32toui32: rounded as $FP_CTL.RND says (0: to nearest
    even); a value outside the integer's range faults (its result is not public)."""
    low, high = (-(1 << 31), (1 << 31) - 1) if signed else (0, (1 << 32) - 1)

    def op(c: Context, x: float) -> int:
        _mode(c)
        n = round(x)
        if not low <= n <= high:
            raise _not_public(c, f"the result of converting {x!r} to a {'signed' if signed else 'unsigned'} integer")
        return n
    return op


def _f32int(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    """f32int d, s, mode: s rounded to an integral f32 by the immediate's
    mode; the sign of a zero result is the operand's (IEEE roundToIntegral)."""
    if o[2] >= len(_ROUNDINGS):
        raise _not_public(c, f"f32int rounding mode {o[2]}")
    x = _operand(c, c.a[o[1]])
    c.set_a(o[0], _exact(F32, math.copysign(float(_ROUNDINGS[o[2]](x)), x)))


def _sqrt(c: Context, x: float) -> float:
    if x < 0:
        _flag(c, INV, "f32 square root of a negative number")
        raise _not_public(c, "the NaN of a negative number's square root")
    return math.sqrt(x)  # -0 stays -0


def _add(c: Context, x: float, y: float) -> float: return x + y
def _sub(c: Context, x: float, y: float) -> float: return x - y
def _mul(c: Context, x: float, y: float) -> float: return x * y
def _absadd(c: Context, x: float, y: float) -> float: return abs(x) + abs(y)


def _div(c: Context, x: float, y: float) -> float:
    if y == 0:
        if x == 0:
            _flag(c, INV, "f32 0/0")
            raise _not_public(c, "the NaN of 0/0")
        _flag(c, DIV0, "f32 division by zero")
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def _zeros(c: Context, x: float, y: float, what: str) -> None:
    if x == 0 and y == 0 and math.copysign(1.0, x) != math.copysign(1.0, y):
        raise _not_public(c, f"which zero {what} of +0 and -0 gives")


def _max(c: Context, x: float, y: float) -> float:
    _zeros(c, x, y, "max")
    return x if x >= y else y


def _min(c: Context, x: float, y: float) -> float:
    _zeros(c, x, y, "min")
    return x if x <= y else y


def _absmax(c: Context, x: float, y: float) -> float:
    return max(abs(x), abs(y))


A = "A hover/{}.md"
J_CMP = ("J ColossusISelLowering.cpp setBooleanContents (float compares: all ones or zero), "
         "ColossusInstrInfo.td FCMP patterns")
#: lane operations of the vector families, their sources, and the broadcast forms they have
_LANE_OPS: dict[str, tuple[LaneOp, str, bool]] = {
    "add": (_rounded(_add), "(per lane, IEEE, RNE)", True),
    "sub": (_rounded(_sub), "(x - y per lane, IEEE, RNE)", True),
    "mul": (_rounded(_mul), "(per lane, IEEE, RNE)", True),
    "max": (_exactly(_max), "(IEEE maxNum: J fmaxnum pattern)", False),
    "min": (_exactly(_min), "(IEEE minNum: J fminnum pattern)", False),
    "absmax": (_exactly(_absmax), "(max of the magnitudes)", False),
    "absadd": (_rounded(_absadd), "(|x| + |y|, RNE)", False),
    "cmpeq": (_compare(lambda x, y: x == y), "; " + J_CMP, True),
    "cmpne": (_compare(lambda x, y: x != y), "; " + J_CMP, True),
    "cmplt": (_compare(lambda x, y: x < y), "; " + J_CMP, True),
    "cmple": (_compare(lambda x, y: x <= y), "; " + J_CMP, True),
    "cmpgt": (_compare(lambda x, y: x > y), "; " + J_CMP, True),
    "cmpge": (_compare(lambda x, y: x >= y), "; " + J_CMP, True),
}
#: prefix -> (format, lanes, broadcast forms besides n)
_SHAPES: dict[str, tuple[Format, int, str]] = {
    "f32": (F32, 1, ""), "f32v2": (F32, 2, "t"), "f16v2": (F16, 2, "lu"), "f16v4": (F16, 4, "lu")}

RULES: dict[str, Rule] = {
    "f32div_aaan": Rule(_vector(F32, 1, "n", _rounded(_div)), A.format("f32div") + "; DIV0 flag: R CAUSEID_DIV_BY_0"),
    "f32sqrt_aaan": Rule(_unary(F32, lambda c, x: _result(c, _sqrt(c, x))),
                         A.format("f32sqrt") + "; J fsqrt pattern (IEEE squareRoot, RNE)"),
    "f32int_aaan_ef": Rule(_f32int, A.format("f32int") + "; modes: J TFPU_ROUND_* (0 even, 1 +inf, 2 -inf, 3 zero, "
                                                         "4 away)"),
    "f32toi32_aaan": Rule(_unary(F32, _to_int(True)), A.format("f32toi32") + " ($FP_CTL.RND 0: to nearest even)"),
    "f32toui32_aaan": Rule(_unary(F32, _to_int(False)), A.format("f32toui32") + " ($FP_CTL.RND 0: to nearest even)"),
    "f16tof32_aaan": Rule(_convert(F16, F32, 1), A.format("f16tof32") + " (the lower half: inferred)"),
    "f16v2tof32_aaan": Rule(_convert(F16, F32, 2), A.format("f16v2tof32") + " (low half to the low register)"),
    "f32tof16_aaan": Rule(_convert(F32, F16, 1, duplicate=True),
                          A.format("f32tof16") + " (RNE; the result in both halves)"),
    "f32v2tof16_aaan": Rule(_convert(F32, F16, 2), A.format("f32v2tof16") + " (low register to the low half)"),
    "f32v4tof16_aaan": Rule(_convert(F32, F16, 4), A.format("f32v4tof16") + " (register i to half i: poplibs Cast "
                                                                             "stores the pair as 4 halves)"),
    "f32fromi32_aaan": Rule(_from_int(True), A.format("f32fromi32") + " (RNE)"),
    "f32fromui32_aaan": Rule(_from_int(False), A.format("f32fromui32") + " (RNE)"),
    "f16v2sum_aaan": Rule(_lateral(F32, 1, _rounded(_add)), A.format("f16v2sum") + " (to f32, RNE)"),
    "f16v4sum_aaan": Rule(_lateral(F32, 2, _rounded(_add)),
                          A.format("f16v4sum") + " (to f32, RNE; lanes 0+1 low, 2+3 high: inferred)"),
    "f16v4maxc_aaan": Rule(_lateral(F16, 2, _exactly(_max)),
                           A.format("f16v4maxc") + " (lanes 0,1 to the low half, 2,3 to the high: inferred)"),
}
#: the native loop's forms of f32 lanes (native/src/executor.c: the same rounding, flags and hand-backs)
_NATIVE_FORMS = {("f32", "n"): "f32", ("f32v2", "n"): "f32v2", ("f32v2", "t"): "f32v2b"}
_NATIVE_LANE_OPS = frozenset({"add", "sub", "mul", "cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"})
for _prefix, (_fmt, _count, _extra) in _SHAPES.items():
    RULES[f"{_prefix}clamp_aaan"] = Rule(_clamp(_fmt, _count), A.format(f"{_prefix}clamp")
                                         + " (min of max; bounds low element first: poplibs Cast's {lower, upper})")
    for _name, (_lane, _why, _broadcasts) in _LANE_OPS.items():
        for _form in "n" + (_extra if _broadcasts else ""):
            _native = _NATIVE_FORMS.get((_prefix, _form), "") if _name in _NATIVE_LANE_OPS else ""
            RULES[f"{_prefix}{_name}_aaa{_form}"] = Rule(_vector(_fmt, _count, _form, _lane),
                                                         A.format(_prefix + _name) + " " + _why,
                                                         f"{_native}.{_name}" if _native else "")
