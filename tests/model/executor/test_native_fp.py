# The native loop against the Python path at floating-point special
# values: every f32 and f16 encoding with a rule (the native forms take
# add, sub, mul and the compares of f32, f32v2, f16v2 and f16v4; the rest
# go back to Python, which must find the same), alone and as the aux half of a bundle, once, with
# $a holding NaNs (quiet, signalling, either sign), ±∞, ±0, subnormals,
# the largest numbers and values whose sums and products overflow, under
# $FP_CTL values that enable each exception, set NANOO, a rounding mode or
# stochastic rounding. And a shift past 31 faults at its own address
# whichever path runs it.
from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import fp
from ipufs.model.isa import Row, encode_row
from ipufs.model.isa.rows import ROWS
from tests.model.executor.kit import assemble, reg, run_until_idle
from tests.model.executor.test_native import (EDGES, MAIN_HALVES, PLAIN_SEED, _IPUS, _one_turn_both_ways,
                                              operand_value)

FP_ROWS = sorted((r for r in ROWS if r.variant in fp.RULES), key=lambda r: r.variant)
NATIVE_FP_ROWS = [r for r in FP_ROWS if fp.RULES[r.variant].native]
F32_SPECIAL = [0x7FC00000, 0xFFC00001, 0x7F800001, 0xFFA00000, 0x7F800000, 0xFF800000, 0, 0x80000000, 1,
               0x807FFFFF, 0x00400000, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x3F800000, 0xC0000000,
               0x4F000000, 0xCF000000, 0x4F800000, 0x3F000000]  # ±2**31, 2**32, 0.5: integer conversions' edges
F16_SPECIAL = [0x7E00, 0xFE01, 0x7C01, 0x7C00, 0xFC00, 0, 0x8000, 1, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7800,
               0x3C00, 0xC000]
F16_WORDS = [a | b << 16 for a in F16_SPECIAL for b in F16_SPECIAL]
FP_WORDS = F32_SPECIAL + F16_WORDS


def _turn(rows: tuple[Row, ...], data: st.DataObject, values: list[int] | st.SearchStrategy[int]) -> None:
    words = [encode_row(row, [data.draw(operand_value(op.kind, op.width)) for op in row.operands], len(rows) == 2)
             for row in rows]
    seed = data.draw(st.integers(0, 1 << 32))
    pick = random.Random(seed)
    values = st.sampled_from(values) if isinstance(values, list) else values
    registers = [pick.choice(EDGES) for _ in range(16)] + data.draw(st.lists(values, min_size=16, max_size=16))
    _one_turn_both_ways(words, data.draw(st.integers(1, 6)), registers, seed)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(FP_ROWS), st.data())
def test_every_fp_instruction_agrees_with_python_at_special_values(row: Row, data: st.DataObject) -> None:
    _turn((row,), data, F32_SPECIAL + FP_WORDS if "f16" in row.mnemonic else F32_SPECIAL)


@settings(max_examples=800, deadline=None)
@given(st.sampled_from(NATIVE_FP_ROWS), st.data())
def test_the_native_fp_forms_agree_with_python_at_special_values(row: Row, data: st.DataObject) -> None:
    _turn((row,), data, F16_WORDS if "f16" in row.mnemonic else F32_SPECIAL)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(NATIVE_FP_ROWS), st.data())
def test_the_native_fp_forms_round_as_python_does(row: Row, data: st.DataObject) -> None:
    """Any bit patterns (the rounding of ordinary values, their overflow
    and underflow), and halves or floats of close magnitudes, whose sums
    and differences often fall halfway between two neighbours."""
    near = st.integers(0x3800, 0x4800) | st.integers(0xB800, 0xC800)
    close = st.one_of(st.tuples(near, near).map(lambda h: h[0] | h[1] << 16),
                      st.integers(0x3F000000, 0x40800000) | st.integers(0xBF000000, 0xC0800000))
    _turn((row,), data, st.integers(0, (1 << 32) - 1) | close)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(MAIN_HALVES), st.sampled_from([r for r in FP_ROWS if r.co_issuable]), st.data())
def test_bundles_with_an_fp_aux_half_agree_with_python_at_special_values(main: Row, aux: Row,
                                                                         data: st.DataObject) -> None:
    _turn((main, aux), data, F32_SPECIAL + FP_WORDS)


def _f32_product(x: int, y: int) -> int:
    return int((np.uint32(x).view(np.float32) * np.uint32(y).view(np.float32)).view(np.uint32))


def test_the_native_loop_takes_special_values_itself() -> None:
    """NaN, infinities, subnormals and overflow in f32 and f16 add, sub,
    mul and compares retire in the native loop (so the agreement above is
    between two paths), with their results and flags."""
    nan, tiny, largest, inf = 0xFF800001, 0x00000003, 0x7F7FFFFF, 0x7F800000
    cases = [("f32add $a0, $a1, $a2", [nan, tiny], {0: 0xFFC00001}, 1),  # the NaN quieted, INV
             ("f32v2mul $a4:5, $a2:B, $a2:3", [0, largest, tiny], {4: inf, 5: _f32_product(largest, tiny)}, 4),  # ∞, OFLO
             ("f32sub $a6, $a3, $a3", [0, 0, inf], {6: 0x7FC00000}, 1),  # ∞ − ∞
             ("f32cmplt $a6, $a1, $a2", [nan, 0], {6: 0}, 1),
             ("f16v2add $a0, $a1, $a2", [0x7BFF0001, 0x7BFF0001], {0: 0x7BFF0002}, 4),  # saturated; 2 × 2**-24
             ("f16v4mul $a4:5, $a1:BU, $a2:3", [0xFC000000, 0x00013C00, 0x7E010000], {4: 0xFC00FC00, 5: 0x7E017E00},
              1),  # -∞ × 1, × 2**-24; × 0: invalid; × NaN: the NaN
             ("f16v2cmpne $a6, $a1:BL, $a2", [0x00003C00, 0x7E003C00], {6: 0xFFFF0000}, 1)]  # 1 ≠ 1, 1 ≠ NaN
    for source, values, want, flags in cases:
        program = assemble(f".text 0x40000\n.worker\n{source}")
        word = int.from_bytes(bytes(program.sections[0].data[:4]), "little")
        edge = _IPUS.get(("edge", True))
        before = edge.execution._loop.retired if edge is not None and edge.execution._loop is not None else 0
        registers = [0] * 17 + values + [0] * (15 - len(values))
        _one_turn_both_ways([word], 1, registers, PLAIN_SEED)
        ex = _IPUS["edge", True].execution
        worker = ex.state(0).contexts[1]
        assert ex._loop is not None and ex._loop.retired - before == 1, source
        assert {r: worker.a[r] for r in want} == want and worker.upper[0] == flags, source


def _shift_fault(source: str, use_native: bool) -> tuple[int, int, int]:
    program = assemble(source)
    ipu = run_until_idle(source, (0,), 1000, native=use_native)
    return reg(ipu, "EXC_CAUSE"), reg(ipu, "EXC_ADDRESS"), program.symbols["here"][1]


def test_a_shift_past_31_faults_at_its_own_address_on_both_paths() -> None:
    for shift in ("shl $m3, $m1, $m2", "shr $m3, $m1, 40", "shrs $m3, $m1, $m2"):
        source = "\n".join([".text 0x40000", ".supervisor", "_start:", "setzi $m1, 1", "setzi $m2, 32", "nop",
                            "here:", shift, "trap 0"])
        for use_native in (True, False):
            cause, address, here = _shift_fault(source, use_native)
            assert (cause, address) == (ExceptionCause.NOT_EXECUTABLE, here), (shift, use_native)
