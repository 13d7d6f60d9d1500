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
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_MIN_NORMAL = 2.0 ** -126
_INF = 0x7F800000


def _not_public(c: Context, why: str) -> TileFault:
    return TileFault(Etype.INVALID_OP, ExceptionCause.NOT_EXECUTABLE, c.pc, f"f32: {why} is not public")


def _operand(c: Context, bits: int) -> float:
    value: float = _F32.unpack(_U32.pack(bits))[0]
    if not math.isfinite(value):
        raise _not_public(c, "arithmetic on NaN or infinity")
    if value != 0 and abs(value) < _MIN_NORMAL:
        raise _not_public(c, "arithmetic on subnormals")
    return value


def _flag(c: Context, flag: int, what: str) -> None:
    """Set a sticky $FP_STS flag; raise the exception if $FP_CTL enables it."""
    c.upper[FP_STS] = c.upper.get(FP_STS, 0) | flag
    if c.upper.get(FP_CTL, 0) & flag:
        raise TileFault(Etype.FP, ExceptionCause.FLOATING_POINT, c.pc, what)


def _result(c: Context, exact: float) -> int:
    """``exact`` (a binary64) rounded to binary32 bits; one that rounds
    past the largest binary32 overflows to infinity (IEEE: inferred)."""
    if math.isinf(exact):  # division by zero, flagged by the caller
        return _INF if exact > 0 else _INF | 0x80000000
    if exact != 0 and abs(exact) < _MIN_NORMAL:
        raise _not_public(c, "a subnormal result (flush or keep)")
    try:
        bits: int = _U32.unpack(_F32.pack(exact))[0]
    except OverflowError:  # struct rounds to nearest even first, then refuses infinity
        if c.upper.get(FP_CTL, 0) & NANOO:
            raise _not_public(c, "overflow with NANOO") from None
        _flag(c, OFLO, "f32 overflow")
        bits = _INF if exact > 0 else _INF | 0x80000000
    return bits


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
        c.set_a(o[0], _U32.unpack(_F32.pack(float(s32(v) if signed else v)))[0])
    return run


A = "A hover/{}.md"
RULES: dict[str, Rule] = {
    "f32add_aaan": Rule(_binary(lambda c, x, y: x + y), A.format("f32add") + " (IEEE binary32, RNE)"),
    "f32sub_aaan": Rule(_binary(lambda c, x, y: x - y), A.format("f32sub") + " (x - y)"),
    "f32mul_aaan": Rule(_binary(lambda c, x, y: x * y), A.format("f32mul")),
    "f32div_aaan": Rule(_binary(_div), A.format("f32div") + "; DIV0 flag: R CAUSEID_DIV_BY_0"),
    "f32fromi32_aaan": Rule(_from_int(True), A.format("f32fromi32") + " (RNE)"),
    "f32fromui32_aaan": Rule(_from_int(False), A.format("f32fromui32") + " (RNE)"),
}
