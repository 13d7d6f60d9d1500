# Floating point at its special values on a worker: NaN (quiet and
# signalling, either sign), ±∞, ±0, subnormals and overflow, in f32 and
# f16 lanes, against an oracle built from numpy's IEEE arithmetic and
# Poplar's FloatingPointBehaviour (a NaN operand is an invalid operation;
# a half-precision overflow saturates, or gives NaN with NANOO); golden
# cases of $FP_STS (INV, DIV0, OFLO), of the exception $FP_CTL enables
# (ETYPE FP, EXC_CAUSE FLOATING_POINT at the instruction's address) and of
# what is still refused (NOT_EXECUTABLE).
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor.state import Etype
from tests.model.executor.kit import assemble, load, make, memory_word, one_worker, reg, start

IPU = make()
INV, DIV0, OFLO, NANOO = 1, 2, 4, 1 << 20
ENABLE_ALL = INV | DIV0 | OFLO
DATA = 0x60000


def run_worker(body: str, data: list[int], ictl: int = 0) -> int:
    """Run ``body`` on worker 1 with $FP_ICTL = ``ictl`` and ``data`` at
    its vertex base; the address of the label `here:` in it, if any."""
    IPU.reset()
    prelude = f"  setzi $m2, {ictl & 0xFFFFF}\n  or $m2, $m2, {ictl & 0xFFF00000}\n  put $FP_ICTL, $m2"
    program = assemble(one_worker(body, vertex=DATA, prelude=prelude,
                                  data="\n".join(f"  .word {w}" for w in data)))
    load(IPU, program)
    start(IPU, program.entry)
    IPU.execution.run(100_000)
    return program.symbols["here"][1] if "here" in program.symbols else 0


def words(first: int, count: int) -> list[int]:
    return [memory_word(IPU, 0, DATA + 4 * (first + i)) for i in range(count)]


def run_pairs(ops: list[str], pairs: list[tuple[int, int]], ictl: int = 0) -> list[tuple[int, int]]:
    """Each of ``ops`` (a mnemonic, for `OP $a2, $a0, $a1`, or a whole
    instruction writing $a2) on its pair of words in $a0, $a1, after
    $FP_CLR: its result and $FP_STS."""
    body = ["  setzi $a7, 7"]
    for i, op in enumerate(ops):
        body += [f"  ld64 $a0:1, $m13, $m15, {i}", "  uput $FP_CLR, $a7",
                 f"  {op}" if " " in op else f"  {op} $a2, $a0, $a1",
                 "  uget $a3, $FP_STS", f"  st64 $a2:3, $m13, $m15, {len(ops) + i}"]
    run_worker("\n".join(body), [w for pair in pairs for w in pair] + [0] * 2 * len(ops), ictl)
    got = words(2 * len(ops), 2 * len(ops))
    return list(zip(got[::2], got[1::2]))


def f32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def f16(x: float) -> int:
    return int(np.float16(x).view(np.uint16))


NUMPY = {32: (np.float32, np.uint32), 16: (np.float16, np.uint16)}
QUIET = {32: 1 << 22, 16: 1 << 9}
DEFAULT_NAN = {32: 0x7FC00000, 16: 0x7E00}
LARGEST = {32: 0x7F7FFFFF, 16: 0x7BFF}
OPS: dict[str, Callable[[np.floating, np.floating], np.floating]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
CMPS: dict[str, Callable[[np.floating, np.floating], bool]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal}


def is_nan(width: int, x: int) -> bool:
    return x & ((1 << (width - 1)) - 1) > (0x7F800000 if width == 32 else 0x7C00)


def expected(op: str, width: int, x: int, y: int, ctl: int) -> tuple[int, int]:
    """The lane's bits and flags: numpy's IEEE result and flags, with a
    NaN operand raising INV and giving the first NaN quieted, an invalid
    operation the default NaN, and a binary16 overflow the largest half
    (or with NANOO the default NaN and INV)."""
    ft, ut = NUMPY[width]
    raised: set[str] = set()
    with np.errstate(all="call", call=lambda kind, _flag: raised.add(kind)):
        w = OPS[op](ut(x).view(ft), ut(y).view(ft))
    flags = (INV if "invalid value" in raised else 0) | (DIV0 if "divide by zero" in raised else 0)
    flags |= OFLO if "overflow" in raised else 0
    if is_nan(width, x) or is_nan(width, y):
        return (x if is_nan(width, x) else y) | QUIET[width], INV
    if np.isnan(w):
        return DEFAULT_NAN[width], INV
    if flags & OFLO and width == 16:
        if ctl & NANOO:
            return DEFAULT_NAN[16], INV | OFLO
        return LARGEST[16] | (0x8000 if w < 0 else 0), OFLO
    return int(np.array(w).view(ut)), flags


def special(width: int) -> st.SearchStrategy[int]:
    """Bit patterns, mostly special: NaNs (quiet, signalling, either sign),
    infinities, zeros, subnormals, the largest numbers, and any."""
    fraction = (1 << (23 if width == 32 else 10)) - 1
    infinity, sign = (0x7F800000, 1 << 31) if width == 32 else (0x7C00, 1 << 15)
    magnitude = st.one_of(st.just(infinity), st.integers(1, fraction).map(lambda f: infinity | f),
                          st.just(0), st.integers(1, fraction), st.just(infinity - 1),
                          st.sampled_from([infinity - 2, infinity >> 1, (infinity >> 1) + 1]),
                          st.integers(0, infinity - 1))
    return st.tuples(magnitude, st.booleans()).map(lambda m: m[0] | (sign if m[1] else 0))


@settings(max_examples=150, deadline=None)
@given(special(32), special(32), st.sampled_from([0, NANOO]))
def test_f32_lanes_at_special_values(x: int, y: int, ctl: int) -> None:
    """add, sub, mul, div and the six compares on one pair of f32, each
    after $FP_CLR, its result and $FP_STS stored."""
    got = run_pairs([f"f32{op}" for op in OPS] + [f"f32cmp{cmp}" for cmp in CMPS], [(x, y)] * (len(OPS) + len(CMPS)),
                    ctl)
    for i, op in enumerate(OPS):
        assert got[i] == expected(op, 32, x, y, ctl), op
    fx, fy = np.uint32(x).view(np.float32), np.uint32(y).view(np.float32)
    flags = INV if is_nan(32, x) or is_nan(32, y) else 0
    for i, cmp in enumerate(CMPS, len(OPS)):
        assert got[i] == (0xFFFFFFFF if CMPS[cmp](fx, fy) else 0, flags), cmp


@settings(max_examples=150, deadline=None)
@given(st.lists(special(16), min_size=4, max_size=4), st.sampled_from([0, NANOO]))
def test_f16_lanes_at_special_values(h: list[int], ctl: int) -> None:
    """f16v2 add, sub, mul on two lanes: each lane as the oracle says, the
    flags of both in $FP_STS."""
    ops = ("add", "sub", "mul")
    got = run_pairs([f"f16v2{op}" for op in ops], [(h[0] | h[1] << 16, h[2] | h[3] << 16)] * len(ops), ctl)
    for (value, flags), op in zip(got, ops):
        lanes = [expected(op, 16, h[0], h[2], ctl), expected(op, 16, h[1], h[3], ctl)]
        assert (value, flags) == (lanes[0][0] | lanes[1][0] << 16, lanes[0][1] | lanes[1][1]), op


def test_invalid_operations_give_nan_and_set_inv() -> None:
    inf = float("inf")
    cases = [("f32add", inf, -inf), ("f32sub", inf, inf), ("f32mul", 0.0, inf), ("f32div", 0.0, -0.0),
             ("f32div", inf, -inf)]
    got = run_pairs([op for op, _, _ in cases], [(f32(x), f32(y)) for _, x, y in cases])
    assert got == [(0x7FC00000, INV)] * len(cases)


def test_a_nan_operand_passes_through_quieted_and_sets_inv() -> None:
    nan = 0xFF800001  # signalling, negative
    got = run_pairs(["f32mul", "f32add", "f32sqrt $a2, $a1"], [(f32(2.0), nan), (nan, f32(2.0)), (0, nan)])
    assert got == [(0xFFC00001, INV)] * 3


def test_division_by_zero_and_infinities() -> None:
    inf = float("inf")
    cases = [(1.0, 0.0, f32(inf), DIV0), (-1.0, 0.0, f32(-inf), DIV0), (1.0, -0.0, f32(-inf), DIV0),
             (inf, 0.0, f32(inf), 0), (-3.0, inf, f32(-0.0), 0), (inf, 2.0, f32(inf), 0)]
    got = run_pairs(["f32div"] * len(cases), [(f32(x), f32(y)) for x, y, _, _ in cases])
    assert got == [(r, f) for _, _, r, f in cases]


def test_infinite_operands_are_exact_and_raise_nothing() -> None:
    inf, big = f32(float("inf")), f32(-3.0e38)
    got = run_pairs(["f32add", "f32mul", "f32sqrt $a2, $a0"], [(inf, big)] * 3)
    assert got == [(inf, 0), (f32(float("-inf")), 0), (inf, 0)]


def test_subnormals_are_ieee_numbers() -> None:
    tiny = 2.0 ** -149
    run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  f32add $a2, $a0, $a0
  f32mul $a3, $a1, $a1
  st64 $a2:3, $m13, $m15, 1
  ld32 $a4, $m13, $m15, 6
  f16v2add $a5, $a4, $a4
  f32tof16 $a6, $a1
  st64 $a4:5, $m13, $m15, 2
  f16tof32 $a7, $a4
  st64 $a6:7, $m13, $m15, 3
""", [f32(tiny), f32(2.0 ** -70), 0, 0, 0, 0, 1 | 0x8200 << 16, 0])
    assert words(2, 2) == [f32(2 * tiny), f32(2.0 ** -140)]  # a subnormal product of normals
    assert words(5, 1) == [2 | 0x8400 << 16]  # 2**-24 + 2**-24, and a negative subnormal doubled
    assert words(6, 2) == [0, f32(2.0 ** -24)]  # 2**-70 is below half the smallest half: +0; the half widened


def test_f16_overflow_saturates_and_with_nanoo_gives_nan() -> None:
    body = """
  ld64 $a0:1, $m13, $m15, 0
  f16v2add $a2, $a0, $a0
  f32tof16 $a3, $a1
  st64 $a2:3, $m13, $m15, 1
  uget $a4, $FP_STS
  ld32 $a5, $m13, $m15, 6
  f16v2mul $a6, $a5, $a5
  st64 $a4:5, $m13, $m15, 2
  st32 $a6, $m13, $m15, 7
"""
    data = [f16(60000.0) | f16(-40000.0) << 16, f32(-1e6), 0, 0, 0, 0, 0x7C00 | f16(2.0) << 16, 0]
    run_worker(body, data)
    assert words(2, 3) == [0x7BFF | 0xFBFF << 16, 0xFBFF * 0x10001, OFLO]
    assert words(7, 1) == [0x7C00 | f16(4.0) << 16]  # ∞ × ∞ is exact: no overflow
    run_worker(body, data, ictl=NANOO)
    assert words(2, 3) == [0x7E00 * 0x10001, 0x7E00 * 0x10001, OFLO | INV]


def test_f32_overflow_gives_infinity_whatever_nanoo() -> None:
    assert run_pairs(["f32add $a2, $a0, $a0"], [(0xFF7FFFFF, 0)], ictl=NANOO) == [(0xFF800000, OFLO)]


def test_compares_with_nan_are_ieee_and_set_inv() -> None:
    nan, halves = 0x7FC00000, f16(1.0) | 0xFE00 << 16
    got = run_pairs(["f32cmpeq", "f32cmpne", "f32cmplt", "f16v2cmpge"], [(nan, f32(1.0))] * 3 + [(halves, halves)])
    assert got == [(0, INV), (0xFFFFFFFF, INV), (0, INV), (0xFFFF, INV)]  # 1 >= 1; NaN >= NaN is false


def test_max_and_min_take_the_number_and_order_the_zeros() -> None:
    zeros, nan = (f32(-0.0), f32(0.0)), (0x7FC00000, f32(-2.0))
    got = run_pairs(["f32max", "f32min $a2, $a1, $a0", "f32max", "f32min", "f32absmax"], [zeros, zeros] + [nan] * 3)
    assert got[:2] == [(f32(0.0), 0), (f32(-0.0), 0)]  # +0 > -0 (IEEE 754-2019), in either order
    assert got[2:] == [(f32(-2.0), INV), (f32(-2.0), INV), (f32(2.0), INV)]  # the number, INV


def test_clamp_passes_a_nan_and_refuses_a_nan_bound() -> None:
    run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  ld32 $a2, $m13, $m15, 2
  f32clamp $a4, $a2, $a0:1
  uget $a5, $FP_STS
  st64 $a4:5, $m13, $m15, 2
""", [f32(-1.0), f32(1.0), 0x7F800010, 0])
    assert words(4, 2) == [0x7FC00010, INV]
    for ictl, cause in ((0, ExceptionCause.NOT_EXECUTABLE), (INV, ExceptionCause.FLOATING_POINT)):
        run_worker("""
  ld64 $a0:1, $m13, $m15, 0
here:
  f32clamp $a3, $a1, $a0:1
""", [0x7FC00000, f32(1.0)], ictl)
        assert reg(IPU, "EXC_CAUSE") == cause


def test_conversions_of_nans_and_infinities() -> None:
    run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  f32tof16 $a2, $a0
  f16tof32 $a3, $a1
  st64 $a2:3, $m13, $m15, 1
  ld32 $a4, $m13, $m15, 4
  f32int $a5, $a4, 0
  f32int $a6, $a0, 3
  uget $a7, $FP_STS
  st64 $a4:5, $m13, $m15, 2
  st64 $a6:7, $m13, $m15, 3
""", [0xFFA00001, 0x7D01 | 0x7C00 << 16, 0, 0, f32(float("-inf")), 0, 0, 0])
    assert words(2, 2) == [0xFF00 * 0x10001, 0x7FE02000]  # sign and the payload's top kept, quieted
    assert words(5, 3) == [f32(float("-inf")), 0xFFE00001, INV]


def test_integer_conversion_of_a_nan_raises_inv_when_enabled_and_is_refused_otherwise() -> None:
    for ictl, cause in ((0, ExceptionCause.NOT_EXECUTABLE), (INV, ExceptionCause.FLOATING_POINT),
                        (DIV0 | OFLO, ExceptionCause.NOT_EXECUTABLE)):
        for value in (0x7FC00000, f32(float("inf")), f32(3e9)):
            at = run_worker("  ld32 $a0, $m13, $m15, 0\nhere:\n  f32toi32 $a1, $a0", [value], ictl)
            assert (reg(IPU, "EXC_CAUSE"), reg(IPU, "EXC_ADDRESS")) == (cause, at), (ictl, hex(value))


def test_an_exception_is_raised_only_where_fp_ctl_enables_it() -> None:
    """Each flag's case with nothing, the other flags, and its own enabled:
    only the last stops the worker (ETYPE FP in $WSR, EXC_CAUSE
    FLOATING_POINT at the instruction, EXC_CONTEXT 1), $FP_STS set and the
    destination unwritten."""
    cases = [(INV, "f32sub $a2, $a0, $a0", f32(float("inf"))), (DIV0, "f32div $a2, $a1, $a3", f32(1.0)),
             (OFLO, "f32mul $a2, $a0, $a0", f32(3e38)), (OFLO, "f16v2add $a2, $a0, $a0", f16(40000.0))]
    for flag, op, value in cases:
        for ictl in (0, ENABLE_ALL & ~flag, flag | NANOO * (flag == OFLO)):
            at = run_worker(f"""
  ld32 $a0, $m13, $m15, 0
  ld32 $a1, $m13, $m15, 1
  setzi $a2, 0x5a5a5
here:
  {op}
  uget $a4, $FP_STS
  st32 $a4, $m13, $m15, 2
""", [value, f32(1.0), 0], ictl)
            worker = IPU.execution.state(0).contexts[1]
            if ictl & flag:
                assert (reg(IPU, "EXC_CAUSE"), reg(IPU, "EXC_ADDRESS"), reg(IPU, "EXC_CONTEXT")) == (
                    ExceptionCause.FLOATING_POINT, at, 1), op
                assert (worker.sr >> 4 & 0xF, worker.upper[0] & flag, worker.a[2]) == (Etype.FP, flag, 0x5A5A5), op
            else:
                assert reg(IPU, "EXC_CAUSE") == ExceptionCause.BREAKPOINT, (op, ictl)  # the supervisor's trap
                assert words(2, 1)[0] & flag == flag, (op, ictl)



def test_a_non_zero_rounding_mode_or_stochastic_rounding_is_refused_only_where_it_rounds() -> None:
    for ictl in (1 << 16, 1 << 19):
        run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  f32cmplt $a2, $a0, $a1
  f32max $a3, $a0, $a1
  f32add $a4, $a0, $a1
  f32add $a5, $a0, $a0
  st64 $a2:3, $m13, $m15, 1
  st64 $a4:5, $m13, $m15, 2
  f32add $a6, $a1, $a1
""", [f32(float("inf")), f32(1.0), 0, 0, 0, 0], ictl)
        assert words(2, 4) == [0, f32(float("inf")), f32(float("inf")), f32(float("inf"))]
        assert reg(IPU, "EXC_CAUSE") == ExceptionCause.NOT_EXECUTABLE  # 1 + 1 rounds
