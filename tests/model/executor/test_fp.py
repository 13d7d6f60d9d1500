# Floating point on a worker (f32, f32v2, f16v2, f16v4: arithmetic,
# compares, max/min/clamp, lateral sums, conversions, sqrt), checked against
# numpy's IEEE binary32/binary16 (round to nearest even); flags, enabled
# exceptions, and what is not public faulting as NOT_EXECUTABLE.
from __future__ import annotations

import struct

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ipufs.abi.registers import ExceptionCause
from tests.model.executor.kit import assemble, load, make, memory_word, one_worker, reg, start

IPU = make()
OPS = {"f32add": np.add, "f32sub": np.subtract, "f32mul": np.multiply, "f32div": np.divide}


def bits(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def run_worker(body: str, data: list[int], ictl: int = 0) -> None:
    IPU.reset()
    prelude = f"  setzi $m2, {ictl & 0xFFFFF}\n  or $m2, $m2, {ictl & 0xFFF00000}\n  put $FP_ICTL, $m2"
    program = assemble(one_worker(body, vertex=0x60000, prelude=prelude,
                                  data="\n".join(f"  .word {w}" for w in data)))
    load(IPU, program)
    start(IPU, program.entry)
    IPU.execution.run(100_000)


def normal32() -> st.SearchStrategy[float]:
    return st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False).filter(
        lambda x: x == 0 or abs(x) >= 2.0 ** -126)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(OPS)), st.floats(width=32, allow_nan=False), st.floats(width=32, allow_nan=False))
def test_f32_arithmetic_rounds_as_ieee_binary32(op: str, x: float, y: float) -> None:
    """Subnormals, infinities, overflow and division by zero included."""
    with np.errstate(all="ignore"):
        want = OPS[op](np.float32(x), np.float32(y))
    run_worker(f"""
  ld32 $a0, $m13, $m15, 0
  ld32 $a1, $m13, $m15, 1
  {op} $a2, $a0, $a1
  st32 $a2, $m13, $m15, 2
""", [bits(x), bits(y), 0])
    got = memory_word(IPU, 0, 0x60008)
    assert got == (0x7FC00000 if np.isnan(want) else bits(float(want)))  # the sign of a zero too
    assert reg(IPU, "EXC_CAUSE") == ExceptionCause.BREAKPOINT  # the supervisor's trap, nothing before


def test_conversions_from_integers() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  f32fromi32 $a1, $a0
  f32fromui32 $a2, $a0
  st32 $a1, $m13, $m15, 1
  st32 $a2, $m13, $m15, 2
""", [0xFFFFFFF9, 0, 0])
    assert memory_word(IPU, 0, 0x60004) == bits(-7.0)
    assert memory_word(IPU, 0, 0x60008) == bits(float(np.float32(0xFFFFFFF9)))


def test_overflow_sets_fp_sts_and_gives_infinity() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  f32mul $a1, $a0, $a0
  st32 $a1, $m13, $m15, 1
  uget $a2, $FP_STS
  st32 $a2, $m13, $m15, 2
""", [bits(3e38), 0, 0])
    assert memory_word(IPU, 0, 0x60004) == 0x7F800000
    assert memory_word(IPU, 0, 0x60008) == 4  # OFLO


def test_an_enabled_exception_is_a_floating_point_exception() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  ld32 $a1, $m13, $m15, 1
  f32div $a2, $a0, $a1
""", [bits(1.0), 0], ictl=2)  # $FP_ICTL.DIV0 -> the worker's $FP_CTL
    assert (reg(IPU, "EXC_CAUSE"), reg(IPU, "EXC_CONTEXT")) == (ExceptionCause.FLOATING_POINT, 1)


def half(x: float) -> int:
    return int(np.float16(x).view(np.uint16))


def normal16() -> st.SearchStrategy[float]:
    """Zero, or binary16 magnitudes from 2**-6 to 200 (no sum, difference or
    product of two of them overflows; few underflow), either sign."""
    magnitude = st.floats(min_value=2.0 ** -6, max_value=200.0, width=16)
    return st.one_of(st.just(0.0), magnitude, magnitude.map(lambda v: -v))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["add", "sub", "mul"]), st.sampled_from(["", ":BL", ":BU"]),
       st.lists(normal16(), min_size=8, max_size=8))
def test_f16v4_lanes_round_as_ieee_binary16(op: str, broadcast: str, values: list[float]) -> None:
    x, y = values[:4], values[4:]
    lanes_x = [x[0]] * 4 if broadcast == ":BL" else [x[1]] * 4 if broadcast == ":BU" else x
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
    with np.errstate(all="ignore"):
        want = [fn(np.float16(a), np.float16(b)) for a, b in zip(lanes_x, y)]  # subnormal results too
    words = [half(x[0]) | half(x[1]) << 16, half(x[2]) | half(x[3]) << 16,
             half(y[0]) | half(y[1]) << 16, half(y[2]) | half(y[3]) << 16]
    source = "$a0" + broadcast if broadcast else "$a0:1"
    run_worker(f"""
  ld64 $a0:1, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f16v4{op} $a4:5, {source}, $a2:3
  st64 $a4:5, $m13, $m15, 2
""", words + [0, 0])
    got = [memory_word(IPU, 0, 0x60010), memory_word(IPU, 0, 0x60014)]
    assert [got[0] & 0xFFFF, got[0] >> 16, got[1] & 0xFFFF, got[1] >> 16] == [
        int(np.float16(w).view(np.uint16)) for w in want]


def test_f32v2_with_a_broadcast_source() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f32v2mul $a4:5, $a0:B, $a2:3
  st64 $a4:5, $m13, $m15, 2
""", [bits(1.5), 0, bits(2.0), bits(-3.25), 0, 0])
    assert [memory_word(IPU, 0, 0x60010), memory_word(IPU, 0, 0x60014)] == [bits(3.0), bits(-4.875)]


def test_conversions_between_f16_and_f32() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  f16v2tof32 $a2:3, $a0
  f32v2tof16 $a4, $a2:3
  ld32 $a5, $m13, $m15, 1
  f32tof16 $a6, $a5
  st64 $a2:3, $m13, $m15, 1
  st32 $a4, $m13, $m15, 4
  st32 $a6, $m13, $m15, 5
""", [half(1.5) | half(-2.25) << 16, bits(1.0 + 2.0 ** -11 + 2.0 ** -20), 0, 0, 0, 0])
    assert [memory_word(IPU, 0, 0x60008), memory_word(IPU, 0, 0x6000C)] == [bits(1.5), bits(-2.25)]
    assert memory_word(IPU, 0, 0x60010) == half(1.5) | half(-2.25) << 16
    rounded = half(float(np.float16(1.0 + 2.0 ** -11 + 2.0 ** -20)))  # up, past the tie
    assert memory_word(IPU, 0, 0x60014) == rounded | rounded << 16 and rounded == half(1.0 + 2.0 ** -10)


def results(first: int, count: int) -> list[int]:
    """``count`` words of the worker's data from word ``first`` on."""
    return [memory_word(IPU, 0, 0x60000 + 4 * (first + i)) for i in range(count)]


def f32s(words: list[int]) -> list[float]:
    return [float(v) for v in np.array(words, dtype=np.uint32).view(np.float32)]


def halves(words: list[int]) -> list[int]:
    return [h for w in words for h in (w & 0xFFFF, w >> 16)]


def pack16(values: list[float]) -> list[int]:
    hs = [half(v) for v in values]
    return [hs[i] | hs[i + 1] << 16 for i in range(0, len(hs), 2)]


CMPS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(CMPS)), st.lists(normal32(), min_size=3, max_size=3), st.booleans())
def test_f32_compares_give_all_ones_or_zero(cmp: str, values: list[float], equal: bool) -> None:
    x, y, z = values
    if equal:
        y = x  # equality, and +0 against -0 when x is a zero
    run_worker(f"""
  ld32 $a0, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f32cmp{cmp} $a4, $a0, $a2
  f32v2cmp{cmp} $a6:7, $a0:B, $a2:3
  st32 $a4, $m13, $m15, 4
  st64 $a6:7, $m13, $m15, 3
""", [bits(x), 0, bits(y), bits(z), 0, 0, 0, 0])
    want = [0xFFFFFFFF if CMPS[cmp](np.float32(x), np.float32(v)) else 0 for v in (y, y, z)]
    assert [results(4, 1)[0], *results(6, 2)] == want


def test_zeros_of_either_sign_compare_equal() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  ld32 $a1, $m13, $m15, 1
  f32cmpeq $a2, $a0, $a1
  f32cmplt $a3, $a0, $a1
  st64 $a2:3, $m13, $m15, 1
""", [bits(-0.0), bits(0.0), 0, 0])
    assert results(2, 2) == [0xFFFFFFFF, 0]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(CMPS)), st.sampled_from(["", ":BL", ":BU"]),
       st.lists(normal16(), min_size=8, max_size=8))
def test_f16_compares_set_every_bit_of_a_true_lane(cmp: str, broadcast: str, values: list[float]) -> None:
    x, y = values[:4], values[4:]
    lanes = [x[0]] * 4 if broadcast == ":BL" else [x[1]] * 4 if broadcast == ":BU" else x
    run_worker(f"""
  ld64 $a0:1, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f16v4cmp{cmp} $a4:5, {"$a0" + broadcast if broadcast else "$a0:1"}, $a2:3
  f16v2cmp{cmp} $a6, {"$a0" + broadcast if broadcast else "$a0"}, $a2
  st64 $a4:5, $m13, $m15, 2
  st32 $a6, $m13, $m15, 6
""", pack16(x) + pack16(y) + [0, 0, 0])
    want = [0xFFFF if CMPS[cmp](np.float16(a), np.float16(b)) else 0 for a, b in zip(lanes, y)]
    assert halves(results(4, 2)) == want and halves(results(6, 1)) == want[:2]


MINMAX = {"max": np.maximum, "min": np.minimum, "absmax": lambda a, b: np.maximum(abs(a), abs(b)),
          "absadd": lambda a, b: abs(a) + abs(b)}


def no_mixed_zeros(a: float, b: float) -> bool:
    return not (a == 0 and b == 0 and np.signbit(a) != np.signbit(b))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(MINMAX)), st.lists(normal32(), min_size=4, max_size=4),
       st.lists(normal16(), min_size=8, max_size=8))
def test_max_min_and_magnitudes_lane_by_lane(op: str, f: list[float], h: list[float]) -> None:
    pairs32 = [(f[0], f[1]), (f[2], f[3])]
    pairs16 = list(zip(h[:4], h[4:]))
    assume(all(no_mixed_zeros(a, b) for a, b in pairs32 + pairs16))
    with np.errstate(all="ignore"):
        want32 = [MINMAX[op](np.float32(a), np.float32(b)) for a, b in pairs32]
        want16 = [MINMAX[op](np.float16(a), np.float16(b)) for a, b in pairs16]
    assume(all(np.isfinite(w) for w in want32 + want16))
    run_worker(f"""
  ld64 $a0:1, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f32{op} $a4, $a0, $a2
  f32v2{op} $a6:7, $a0:1, $a2:3
  st32 $a4, $m13, $m15, 8
  st64 $a6:7, $m13, $m15, 5
  ld64 $a0:1, $m13, $m15, 2
  ld64 $a2:3, $m13, $m15, 3
  f16v4{op} $a4:5, $a0:1, $a2:3
  f16v2{op} $a6, $a0, $a2
  st64 $a4:5, $m13, $m15, 6
  st32 $a6, $m13, $m15, 9
""", [bits(f[0]), bits(f[2]), bits(f[1]), bits(f[3])] + pack16(h[:4]) + pack16(h[4:]) + [0] * 6)
    assert results(8, 1) == [bits(float(want32[0]))]
    assert results(10, 2) == [bits(float(w)) for w in want32]
    hw = [int(np.float16(w).view(np.uint16)) for w in want16]
    assert halves(results(12, 2)) == hw and halves(results(9, 1)) == hw[:2]


@settings(max_examples=25, deadline=None)
@given(st.lists(normal32(), min_size=4, max_size=4), st.lists(normal16(), min_size=6, max_size=6))
def test_clamp_is_min_of_max_with_the_lower_bound_first(f: list[float], h: list[float]) -> None:
    lo32, hi32 = sorted(f[1:3])
    lo16, hi16 = sorted(h[4:])
    assume(all(no_mixed_zeros(a, b) for a in (f[0], f[3], lo32) for b in (lo32, hi32)))
    assume(all(no_mixed_zeros(a, b) for a in h[:4] + [lo16] for b in (lo16, hi16)))
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f32clamp $a4, $a0, $a2:3
  ld64 $a0:1, $m13, $m15, 2
  f32v2clamp $a6:7, $a0:1, $a2:3
  st32 $a4, $m13, $m15, 8
  st64 $a6:7, $m13, $m15, 5
  ld64 $a0:1, $m13, $m15, 3
  ld32 $a2, $m13, $m15, 14
  f16v4clamp $a4:5, $a0:1, $a2
  f16v2clamp $a6, $a0, $a2
  st64 $a4:5, $m13, $m15, 6
  st32 $a6, $m13, $m15, 9
""", [bits(f[0]), 0, bits(lo32), bits(hi32), bits(f[0]), bits(f[3]), *pack16(h[:4]), 0, 0, 0, 0, 0, 0,
      half(lo16) | half(hi16) << 16, 0])
    assert results(8, 1) == [bits(min(max(f[0], lo32), hi32))]
    assert results(10, 2) == [bits(min(max(v, lo32), hi32)) for v in (f[0], f[3])]
    want16 = [half(float(np.minimum(np.maximum(np.float16(v), np.float16(lo16)), np.float16(hi16)))) for v in h[:4]]
    assert halves(results(12, 2)) == want16 and halves(results(9, 1)) == want16[:2]


def test_f32v4tof16_rounds_each_lane_to_nearest_even_and_saturates_on_overflow() -> None:
    tie_down = 1.0 + 2.0 ** -11  # halfway between 1 and the next f16: to even, 1
    tie_up = 1.0 + 3 * 2.0 ** -11  # halfway, to the even neighbour above
    values = [tie_down, tie_up, -0.0, 70000.0]
    run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f32v4tof16 $a4:5, $a0:3
  st64 $a4:5, $m13, $m15, 2
  uget $a6, $FP_STS
  st32 $a6, $m13, $m15, 6
""", [bits(v) for v in values] + [0, 0, 0])
    with np.errstate(all="ignore"):
        want = [int(np.float16(v).view(np.uint16)) for v in values]
    assert halves(results(4, 2))[:3] == want[:3] and want[:3] == [half(1.0), half(1.0 + 2.0 ** -9), 0x8000]
    assert want[3] == 0x7C00 and halves(results(4, 2))[3] == 0x7BFF and results(6, 1) == [4]  # the largest half, OFLO


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(min_value=-2.0 ** 31, max_value=2.0 ** 31 - 256, width=32).filter(
    lambda x: x == 0 or abs(x) >= 2.0 ** -126), min_size=2, max_size=2), st.integers(0, 4))
def test_f32_to_integers_and_to_integral_values(values: list[float], mode: int) -> None:
    x, y = values[0], abs(values[1])
    run_worker(f"""
  ld64 $a0:1, $m13, $m15, 0
  f32toi32 $a2, $a0
  f32toui32 $a3, $a1
  f32int $a4, $a0, {mode}
  f32int $a5, $a1, {mode}
  st64 $a2:3, $m13, $m15, 1
  st64 $a4:5, $m13, $m15, 2
""", [bits(x), bits(y), 0, 0, 0, 0])
    rounders = [np.rint, np.ceil, np.floor, np.trunc, lambda v: np.sign(v) * np.floor(abs(v) + 0.5)]
    assert results(2, 2) == [int(np.rint(x)) & 0xFFFFFFFF, int(np.rint(y))]  # binary64: exact for f32 values
    integral = [float(np.copysign(rounders[mode](np.float64(v)), v)) for v in (x, y)]
    assert results(4, 2) == [bits(v) for v in integral]


def test_rounding_ties_go_to_even_and_zeros_keep_their_sign() -> None:
    values = [2.5, -2.5, 3.5, -0.25]
    run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  f32toi32 $a4, $a0
  f32toi32 $a5, $a1
  f32toi32 $a6, $a2
  f32int $a7, $a3, 0
  st64 $a4:5, $m13, $m15, 2
  st64 $a6:7, $m13, $m15, 3
  f32int $a4, $a1, 4
  f32int $a5, $a3, 1
  st64 $a4:5, $m13, $m15, 4
""", [bits(v) for v in values] + [0] * 6)
    assert results(4, 4) == [2, (-2) & 0xFFFFFFFF, 4, bits(-0.0)]
    assert results(8, 2) == [bits(-3.0), bits(-0.0)]  # away from zero; ceil(-0.25) = -0


def test_out_of_range_conversions_and_unknown_rounding_modes_are_not_guessed() -> None:
    for body, value in (("f32toi32 $a1, $a0", 2.0 ** 31), ("f32toui32 $a1, $a0", -1.0),
                        ("f32int $a1, $a0, 5", 1.5)):
        run_worker(f"  ld32 $a0, $m13, $m15, 0\n  {body}", [bits(value)])
        assert reg(IPU, "EXC_CAUSE") == ExceptionCause.NOT_EXECUTABLE, body


@settings(max_examples=30, deadline=None)
@given(normal32().map(abs))
def test_square_root_is_correctly_rounded(x: float) -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  f32sqrt $a1, $a0
  st32 $a1, $m13, $m15, 1
""", [bits(x), 0])
    assert results(1, 1) == [bits(float(np.sqrt(np.float32(x))))]


def test_square_root_of_negative_zero_and_of_a_negative_number() -> None:
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  f32sqrt $a1, $a0
  st32 $a1, $m13, $m15, 1
  ld32 $a0, $m13, $m15, 2
  f32sqrt $a1, $a0
""", [bits(-0.0), 0, bits(-4.0)], ictl=1)  # INV enabled: the negative operand raises it
    assert results(1, 1) == [bits(-0.0)]
    assert reg(IPU, "EXC_CAUSE") == ExceptionCause.FLOATING_POINT


@settings(max_examples=30, deadline=None)
@given(st.lists(normal16(), min_size=4, max_size=4))
def test_lateral_sums_and_maxima_of_halves(h: list[float]) -> None:
    assume(no_mixed_zeros(h[0], h[1]) and no_mixed_zeros(h[2], h[3]))
    run_worker("""
  ld64 $a0:1, $m13, $m15, 0
  f16v4sum $a2:3, $a0:1
  f16v2sum $a4, $a1
  f16v4maxc $a5, $a0:1
  st64 $a2:3, $m13, $m15, 1
  st64 $a4:5, $m13, $m15, 2
""", pack16(h) + [0] * 4)
    sums = [float(np.float32(float(np.float16(a)) + float(np.float16(b)))) for a, b in ((h[0], h[1]), (h[2], h[3]))]
    assert results(2, 3) == [bits(sums[0]), bits(sums[1]), bits(sums[1])]
    assert halves(results(5, 1)) == [half(float(max(np.float16(a), np.float16(b)))) for a, b in ((h[0], h[1]),
                                                                                                  (h[2], h[3]))]


def test_approximations_classes_and_f16v2maxc_are_not_executed_and_say_why() -> None:
    for body, why in (("f32exp $a1, $a0", "accuracy"), ("f16v2tanh $a1, $a0", "accuracy"),
                      ("f32oox $a1, $a0", "accuracy"), ("f32class $a1, $a0", "class numbers"),
                      ("f16v2maxc $a1, $a0", "lands")):
        run_worker(f"  ld32 $a0, $m13, $m15, 0\n  {body}", [bits(1.0)])
        assert reg(IPU, "EXC_CAUSE") == ExceptionCause.NOT_EXECUTABLE, body
        assert any(body.split()[0] in e.detail and why in e.detail for e in IPU.execution.events), body


def test_a_lateral_sum_tie_rounds_to_even_and_an_f16_overflow_is_flagged() -> None:
    a, b = 2050.0, 3 * 2.0 ** -13  # 2050 + 2^-12 + 2^-13: halfway, to the even f32 above
    run_worker("""
  ld32 $a0, $m13, $m15, 0
  f16v2sum $a1, $a0
  ld32 $a2, $m13, $m15, 1
  f16v2absadd $a3, $a2, $a2
  st64 $a0:1, $m13, $m15, 1
  st32 $a3, $m13, $m15, 4
  uget $a4, $FP_STS
  st32 $a4, $m13, $m15, 5
""", [half(a) | half(b) << 16, half(-60000.0) | half(1.0) << 16, 0, 0, 0, 0])
    want = float(np.float32(a + b))
    assert results(3, 1) == [bits(want)] and want == 2050.0 + 2.0 ** -11
    assert halves(results(4, 1)) == [0x7BFF, half(2.0)] and results(5, 1) == [4]  # the largest half and OFLO
