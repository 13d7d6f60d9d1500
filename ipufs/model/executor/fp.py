# Semantics of the scalar f32 arithmetic a worker runs on $a: f32add,
# f32sub, f32mul, f32div (A hover/f32add.md ...: IEEE binary32, W's ABI
# page), and conversions from integers (A hover/f32fromi32.md). Results are
# rounded to nearest even: the exact binary64 result of two binary32
# operands, rounded once to binary32, is the correctly rounded binary32
# result for these operations. $FP_STS gets INV/DIV0/OFLO and an enabled
# one in $FP_CTL raises ETYPE FP (R TEXCPT_FP; A hover/$FP_STS.md).
# What the public record leaves open faults as NOT_EXECUTABLE rather than
# guess: NaN, infinite or subnormal operands, subnormal or NaN results, a
# non-zero $FP_CTL.RND (its encoding is not public; 0 is taken as
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
    from ipufs.model.executor.engine import Execution
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


F32 = Format("f32", struct.Struct("<f"), 32, 2.0 ** -126, 23)
F16 = Format("f16", struct.Struct("<e"), 16, 2.0 ** -14, 10)


def _not_public(c: Context, why: str) -> TileFault:
    return TileFault(Etype.INVALID_OP, ExceptionCause.NOT_EXECUTABLE, c.pc, f"floating point: {why} is not public")


def _operand(c: Context, bits: int, fmt: Format = F32) -> float:
    value: float = fmt.packer.unpack(bits.to_bytes(fmt.bits // 8, "little"))[0]
    if not math.isfinite(value):
        raise _not_public(c, "arithmetic on NaN or infinity")
    if value != 0 and abs(value) < fmt.min_normal:
        raise _not_public(c, "arithmetic on subnormals")
    return value


def _flag(c: Context, flag: int, what: str) -> None:
    """Set a sticky $FP_STS flag; raise the exception if $FP_CTL enables it."""
    c.upper[FP_STS] = c.upper.get(FP_STS, 0) | flag
    if c.upper.get(FP_CTL, 0) & flag:
        raise TileFault(Etype.FP, ExceptionCause.FLOATING_POINT, c.pc, what)


def _result(c: Context, exact: float, fmt: Format = F32) -> int:
    """``exact`` (a binary64) rounded to ``fmt``'s bits; one that rounds
    past the format's largest value overflows to infinity (IEEE: inferred)."""
    if math.isinf(exact):  # division by zero, flagged by the caller
        return fmt.infinity | (fmt.sign if exact < 0 else 0)
    if exact != 0 and abs(exact) < fmt.min_normal:
        raise _not_public(c, "a subnormal result (flush or keep)")
    try:
        return int.from_bytes(fmt.packer.pack(exact), "little")
    except OverflowError:  # struct rounds to nearest even first, then refuses infinity
        if c.upper.get(FP_CTL, 0) & NANOO:
            raise _not_public(c, "overflow with NANOO") from None
        _flag(c, OFLO, f"{fmt.name} overflow")
        return fmt.infinity | (fmt.sign if exact < 0 else 0)


def _mode(c: Context) -> None:
    ctl = c.upper.get(FP_CTL, 0)
    if ctl & RND_MASK:
        raise _not_public(c, "the rounding mode encoding of $FP_CTL.RND")
    if ctl & ESR:
        raise _not_public(c, "stochastic rounding")


def _binary(op: Callable[[Context, float, float], float]) -> Handler:
    def run(ex: Execution, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        _mode(c)
        x, y = _operand(c, c.a[o[1]]), _operand(c, c.a[o[2]])
        c.set_a(o[0], _result(c, op(c, x, y)))
    return run


def _div(c: Context, x: float, y: float) -> float:
    if y == 0:
        if x == 0:
            _flag(c, INV, "f32 0/0")
            raise _not_public(c, "the NaN of 0/0")
        _flag(c, DIV0, "f32 division by zero")
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def _from_int(signed: bool) -> Handler:
    def run(ex: Execution, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        _mode(c)
        v = c.a[o[1]]
        c.set_a(o[0], int.from_bytes(F32.packer.pack(float(s32(v) if signed else v)), "little"))
    return run


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


def _vector(fmt: Format, lanes: int, form: str, op: Callable[[Context, float, float], float]) -> Handler:
    """Lane by lane, as the scalar operation (J: broadcast forms by the
    variant's last letter; lane order low half / low register first)."""
    def run(ex: Execution, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        _mode(c)
        xs = _read_lanes(c, o[1], fmt, lanes, form)
        ys = _read_lanes(c, o[2], fmt, lanes, "n")
        _write_lanes(c, o[0], fmt, [_result(c, op(c, _operand(c, x, fmt), _operand(c, y, fmt)), fmt)
                                    for x, y in zip(xs, ys)])
    return run


def _convert(source: Format, target: Format, lanes: int, duplicate: bool = False) -> Handler:
    """Each lane of ``source`` converted to ``target``, rounded to nearest
    even (f16 → f32 is exact); f32tof16 writes its half to both halves."""
    def run(ex: Execution, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        _mode(c)
        values = [_result(c, _operand(c, v, source), target) for v in _read_lanes(c, o[1], source, lanes, "n")]
        if duplicate:
            values = values * 2
        _write_lanes(c, o[0], target, values)
    return run


def _add(c: Context, x: float, y: float) -> float: return x + y
def _sub(c: Context, x: float, y: float) -> float: return x - y
def _mul(c: Context, x: float, y: float) -> float: return x * y


A = "A hover/{}.md"
RULES: dict[str, Rule] = {
    "f32add_aaan": Rule(_binary(_add), A.format("f32add") + " (IEEE binary32, RNE)"),
    "f32sub_aaan": Rule(_binary(_sub), A.format("f32sub") + " (x - y)"),
    "f32mul_aaan": Rule(_binary(_mul), A.format("f32mul")),
    "f32div_aaan": Rule(_binary(_div), A.format("f32div") + "; DIV0 flag: R CAUSEID_DIV_BY_0"),
    "f16tof32_aaan": Rule(_convert(F16, F32, 1), A.format("f16tof32") + " (the lower half: inferred)"),
    "f16v2tof32_aaan": Rule(_convert(F16, F32, 2), A.format("f16v2tof32") + " (low half to the low register)"),
    "f32tof16_aaan": Rule(_convert(F32, F16, 1, duplicate=True),
                          A.format("f32tof16") + " (RNE; the result in both halves)"),
    "f32v2tof16_aaan": Rule(_convert(F32, F16, 2), A.format("f32v2tof16") + " (low register to the low half)"),
    "f32fromi32_aaan": Rule(_from_int(True), A.format("f32fromi32") + " (RNE)"),
    "f32fromui32_aaan": Rule(_from_int(False), A.format("f32fromui32") + " (RNE)"),
}
for _name, _op in (("add", _add), ("sub", _sub), ("mul", _mul)):
    for _fmt, _lanes, _forms in ((F32, 2, "nt"), (F16, 2, "nlu"), (F16, 4, "nlu")):
        for _form in _forms:
            _variant = f"{_fmt.name}v{_lanes}{_name}_aaa{_form}"
            RULES[_variant] = Rule(_vector(_fmt, _lanes, _form, _op),
                                   A.format(f"{_fmt.name}v{_lanes}{_name}") + " (per lane, IEEE, RNE)")
