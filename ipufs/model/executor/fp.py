# Semantics of the floating point a worker runs on $a: f32 scalars, f32v2,
# f16v2 and f16v4 vectors (lane by lane), conversions between f32, f16 and
# integers. The arithmetic of one lane, its special values and its flags
# are ieee.py's; this module reads the lanes from the registers, writes the
# results, and keeps $FP_STS and $FP_CTL (worker upper CSRs 0 and 2: J's
# CSR list, G csrs_ipu1.s).
#
# $FP_STS holds sticky flags INV[0] DIV0[1] OFLO[2]; $FP_CTL (copied from
# the supervisor's $FP_ICTL at a worker's launch: A hover/$FP_ICTL.md)
# enables an exception for each in the same bits, and holds RND[18:16],
# ESR[19] and NANOO[20] (R research/ipu1/ipu1_consts.c,
# CSR_W_FP_STS__*, CSR_W_FP_CTL__*, CSR_S_FP_ICTL__*; L: poplibs sets
# $FP_ICTL from Poplar's {inv, div0, oflo, esr, nanoo} by those shifts, and
# elemwiseMiscCodelets.cpp reads NANOO as bit 20). Every lane of an
# instruction is computed, their flags join $FP_STS, and a flag $FP_CTL
# enables raises ETYPE FP (R TEXCPT_FP; cause FLOATING_POINT) with the
# destination unwritten (ours: whether a faulting instruction writes is not
# public). Compares give all ones (true) or zero per lane (J
# ColossusISelLowering.cpp: "all zeros/ones predicates"); clamp is
# min(max(x, lo), hi) with the bounds low element first (A
# "min-of-maximum"; Graphcore's poplibs Cast passes {lower, upper}).
# What the public record leaves open faults as NOT_EXECUTABLE rather than
# guess: a non-zero $FP_CTL.RND (its encoding is not stated; 0 is taken as
# round-to-nearest-even), stochastic rounding (ESR), the integer a NaN, an
# infinity or an out-of-range value converts to, clamp with a NaN bound
# (unless the INV they raise is enabled: the exception comes first).
from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import ieee
from ipufs.model.executor.ieee import DIV0, F16, F32, INV, OFLO, Format
from ipufs.model.executor.rule import Handler, Rule, s32
from ipufs.model.executor.state import Etype, TileFault

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

FP_STS, FP_CTL = 0, 2
ENABLES = INV | DIV0 | OFLO
_FLAG_NAMES = ((INV, "INV (invalid operation)"), (DIV0, "DIV0 (division by zero)"), (OFLO, "OFLO (overflow)"))

#: one lane: () -> (bits, flags), raising ieee.Unknown when its result is not public
Lane = Callable[[], tuple[int, int]]


def _not_public(c: Context, why: str) -> TileFault:
    return TileFault(Etype.INVALID_OP, ExceptionCause.NOT_EXECUTABLE, c.pc, f"floating point: {why} is not public")


def lanes_done(c: Context, lanes: list[Lane]) -> list[int]:
    """Every lane's bits. Their flags join $FP_STS; one $FP_CTL enables
    raises the floating-point exception (nothing written). A lane whose
    result is not public refuses the instruction, with nothing changed,
    unless an enabled flag the lanes raise whatever it is stops it first."""
    values, flags, unknown = [], 0, None
    for lane in lanes:
        try:
            bits, raised = lane()
        except ieee.Unknown as u:
            if u.flags is None:
                raise _not_public(c, str(u)) from None
            bits, raised, unknown = 0, u.flags, unknown or u
        values.append(bits)
        flags |= raised
    enabled = flags & c.upper[FP_CTL] & ENABLES
    if unknown is not None and not enabled:
        raise _not_public(c, str(unknown))
    c.upper[FP_STS] = c.upper[FP_STS] | flags
    if enabled:
        names = ", ".join(name for flag, name in _FLAG_NAMES if enabled & flag)
        raise TileFault(Etype.FP, ExceptionCause.FLOATING_POINT, c.pc, f"floating-point exception: {names}")
    return values


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


#: one lane of a binary operation: (format, x bits, y bits, $FP_CTL) -> (bits, flags)
LaneOp = Callable[[Format, int, int, int], tuple[int, int]]


def _arith(op: str) -> LaneOp:
    return lambda f, x, y, ctl: ieee.arith(op, f, f, x, y, ctl)


def _absadd(f: Format, x: int, y: int, ctl: int) -> tuple[int, int]:
    """|x| + |y|: the signs cleared first (as IEEE abs does, a NaN's too)."""
    return ieee.arith("add", f, f, x & ~f.sign, y & ~f.sign, ctl)


def _extremum(larger: bool, magnitudes: bool = False) -> LaneOp:
    def lane(f: Format, x: int, y: int, ctl: int) -> tuple[int, int]:
        if magnitudes:
            x, y = x & ~f.sign, y & ~f.sign
        return ieee.extremum(f, x, y, larger)
    return lane


def _compare(test: Callable[[float, float], bool]) -> LaneOp:
    def lane(f: Format, x: int, y: int, ctl: int) -> tuple[int, int]:
        true, flags = ieee.compare(test, f, x, y)
        return (f.ones if true else 0), flags
    return lane


def _vector(fmt: Format, lanes: int, form: str, lane: LaneOp) -> Handler:
    """Lane by lane (a scalar is one lane; J: broadcast forms by the
    variant's last letter; lane order low half / low register first)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        ctl = c.upper[FP_CTL]
        xs, ys = _read_lanes(c, o[1], fmt, lanes, form), _read_lanes(c, o[2], fmt, lanes, "n")
        _write_lanes(c, o[0], fmt, lanes_done(c, [partial(lane, fmt, x, y, ctl) for x, y in zip(xs, ys)]))
    return run


def _clamp(fmt: Format, lanes: int) -> Handler:
    """min(max(x, lo), hi) per lane; the bounds are the two elements of
    the last operand (a pair of f32, or the halves of one register)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        low, high = _read_lanes(c, o[2], fmt, 2, "n")
        xs = _read_lanes(c, o[1], fmt, lanes, "n")
        _write_lanes(c, o[0], fmt, lanes_done(c, [partial(ieee.clamp, fmt, x, low, high) for x in xs]))
    return run


def _lateral(target: Format, pairs: int, lane: Callable[[int, int, int], tuple[int, int]]) -> Handler:
    """f16 lanes combined two by two (lanes 0 and 1, then 2 and 3) into
    ``target`` lanes: f16v2sum, f16v4sum (to f32), f16v4maxc (to f16)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        ctl = c.upper[FP_CTL]
        xs = _read_lanes(c, o[1], F16, 2 * pairs, "n")
        _write_lanes(c, o[0], target, lanes_done(c, [partial(lane, xs[2 * i], xs[2 * i + 1], ctl)
                                                     for i in range(pairs)]))
    return run


def _unary(op: Callable[[int, int], tuple[int, int]]) -> Handler:
    """One f32 (or integer) in, one word out: op(source bits, $FP_CTL)."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        c.set_a(o[0], lanes_done(c, [partial(op, c.a[o[1]], c.upper[FP_CTL])])[0])
    return run


def _convert(source: Format, target: Format, lanes: int, duplicate: bool = False) -> Handler:
    """Each lane of ``source`` converted to ``target`` (f16 -> f32 is exact;
    f32 -> f16 rounds and may overflow); f32tof16 writes its half to both
    halves."""
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        ctl = c.upper[FP_CTL]
        xs = _read_lanes(c, o[1], source, lanes, "n")
        values = lanes_done(c, [partial(ieee.convert, source, target, x, ctl) for x in xs])
        _write_lanes(c, o[0], target, values * 2 if duplicate else values)
    return run


def _f32int(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_a(o[0], lanes_done(c, [partial(ieee.integral, c.a[o[1]], o[2])])[0])


A = "A hover/{}.md"
J_CMP = ("J ColossusISelLowering.cpp setBooleanContents (float compares: all ones or zero), "
         "ColossusInstrInfo.td FCMP patterns; NaN: G f32-comparisons.ll (ord = cmpeq x, x; uno = cmpne x, x)")
#: lane operations of the vector families, their sources, and the broadcast forms they have
_LANE_OPS: dict[str, tuple[LaneOp, str, bool]] = {
    "add": (_arith("add"), "(per lane, IEEE, RNE)", True),
    "sub": (_arith("sub"), "(x - y per lane, IEEE, RNE)", True),
    "mul": (_arith("mul"), "(per lane, IEEE, RNE)", True),
    "max": (_extremum(True), "(IEEE maxNum: J fmaxnum pattern; +0 > -0: IEEE 754-2019)", False),
    "min": (_extremum(False), "(IEEE minNum: J fminnum pattern; -0 < +0: IEEE 754-2019)", False),
    "absmax": (_extremum(True, magnitudes=True), "(maxNum of the magnitudes)", False),
    "absadd": (_absadd, "(|x| + |y|, RNE)", False),
    "cmpeq": (_compare(operator.eq), "; " + J_CMP, True),
    "cmpne": (_compare(operator.ne), "; " + J_CMP, True),
    "cmplt": (_compare(operator.lt), "; " + J_CMP, True),
    "cmple": (_compare(operator.le), "; " + J_CMP, True),
    "cmpgt": (_compare(operator.gt), "; " + J_CMP, True),
    "cmpge": (_compare(operator.ge), "; " + J_CMP, True),
}
#: prefix -> (format, lanes, broadcast forms besides n)
_SHAPES: dict[str, tuple[Format, int, str]] = {
    "f32": (F32, 1, ""), "f32v2": (F32, 2, "t"), "f16v2": (F16, 2, "lu"), "f16v4": (F16, 4, "lu")}
POPLAR = "Poplar FloatingPointBehaviour (NaN, INV, NANOO)"

RULES: dict[str, Rule] = {
    "f32div_aaan": Rule(_vector(F32, 1, "n", _arith("div")), A.format("f32div") + "; DIV0 flag: R CAUSEID_DIV_BY_0, "
                                                                                  "IEEE 754 §7.3; " + POPLAR),
    "f32sqrt_aaan": Rule(_unary(partial(ieee.sqrt, F32)),
                         A.format("f32sqrt") + "; J fsqrt pattern (IEEE squareRoot, RNE); " + POPLAR),
    "f32int_aaan_ef": Rule(_f32int, A.format("f32int") + "; modes: J TFPU_ROUND_* (0 even, 1 +inf, 2 -inf, 3 zero, "
                                                         "4 away)"),
    "f32toi32_aaan": Rule(_unary(lambda v, ctl: ieee.to_integer(v, True, ctl)),
                          A.format("f32toi32") + " ($FP_CTL.RND 0: to nearest even; invalid: IEEE 754 §5.8)"),
    "f32toui32_aaan": Rule(_unary(lambda v, ctl: ieee.to_integer(v, False, ctl)),
                           A.format("f32toui32") + " ($FP_CTL.RND 0: to nearest even; invalid: IEEE 754 §5.8)"),
    "f16tof32_aaan": Rule(_convert(F16, F32, 1), A.format("f16tof32") + " (the lower half: inferred)"),
    "f16v2tof32_aaan": Rule(_convert(F16, F32, 2), A.format("f16v2tof32") + " (low half to the low register)"),
    "f32tof16_aaan": Rule(_convert(F32, F16, 1, duplicate=True),
                          A.format("f32tof16") + " (RNE; the result in both halves); " + POPLAR),
    "f32v2tof16_aaan": Rule(_convert(F32, F16, 2), A.format("f32v2tof16") + " (low register to the low half)"),
    "f32v4tof16_aaan": Rule(_convert(F32, F16, 4), A.format("f32v4tof16") + " (register i to half i: poplibs Cast "
                                                                             "stores the pair as 4 halves)"),
    "f32fromi32_aaan": Rule(_unary(lambda v, ctl: ieee.from_integer(s32(v), ctl)), A.format("f32fromi32") + " (RNE)"),
    "f32fromui32_aaan": Rule(_unary(ieee.from_integer), A.format("f32fromui32") + " (RNE)"),
    "f16v2sum_aaan": Rule(_lateral(F32, 1, partial(ieee.arith, "add", F16, F32)), A.format("f16v2sum") + " (to f32, "
                                                                                                         "RNE)"),
    "f16v4sum_aaan": Rule(_lateral(F32, 2, partial(ieee.arith, "add", F16, F32)),
                          A.format("f16v4sum") + " (to f32, RNE; lanes 0+1 low, 2+3 high: inferred)"),
    "f16v4maxc_aaan": Rule(_lateral(F16, 2, lambda x, y, ctl: ieee.extremum(F16, x, y, True)),
                           A.format("f16v4maxc") + " (lanes 0,1 to the low half, 2,3 to the high: inferred)"),
}
#: the native loop's forms of f32 and f16 lanes (native/src/executor.c: the same results, flags and hand-backs)
_NATIVE_FORMS = {("f32", "n"): "f32", ("f32v2", "n"): "f32v2", ("f32v2", "t"): "f32v2b", ("f16v2", "n"): "f16v2",
                 ("f16v2", "l"): "f16v2l", ("f16v2", "u"): "f16v2u", ("f16v4", "n"): "f16v4", ("f16v4", "l"): "f16v4l",
                 ("f16v4", "u"): "f16v4u"}
_NATIVE_LANE_OPS = frozenset({"add", "sub", "mul", "cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"})
for _prefix, (_fmt, _count, _extra) in _SHAPES.items():
    RULES[f"{_prefix}clamp_aaan"] = Rule(_clamp(_fmt, _count), A.format(f"{_prefix}clamp")
                                         + " (min of max; bounds low element first: poplibs Cast's {lower, upper}; "
                                           "a NaN passes: poplibs popfloat)")
    for _name, (_lane, _why, _broadcasts) in _LANE_OPS.items():
        for _form in "n" + (_extra if _broadcasts else ""):
            _native = _NATIVE_FORMS.get((_prefix, _form), "") if _name in _NATIVE_LANE_OPS else ""
            RULES[f"{_prefix}{_name}_aaa{_form}"] = Rule(_vector(_fmt, _count, _form, _lane),
                                                         A.format(_prefix + _name) + " " + _why,
                                                         f"{_native}.{_name}" if _native else "")
