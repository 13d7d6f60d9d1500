# Each semantic group, run as programs written for `ipufs asm`, checked
# against the same computation in plain Python.
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import ExceptionCause, TdiResult
from ipufs.model.executor import SEMANTICS, Status
from ipufs.model.executor.semantics import why_not
from ipufs.model.isa.rows import ROWS
from ipufs.model.debug import TdiRegister, TdiStatus
from tests.model.executor.kit import (BASE, assemble, load, m, make, memory_word, one_worker, reg, run, run_until_idle,
                                      start, tdi_read, tdi_write, word)

MASK = 0xFFFFFFFF


def s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def test_integer_arithmetic_and_logic() -> None:
    x, y = 0x89ABCDEF, 0x00001234
    ipu = run(f"""
.text
.supervisor
_start:
  setzi $m1, {x & 0xFFFFF}
  or $m1, $m1, {x & 0xFFF00000}
  setzi $m2, {y}
  add $m3, $m1, $m2
  sub $m4, $m1, $m2
  mul $m5, $m1, $m2
  and $m6, $m1, $m2
  xor $m7, $m1, $m2
  shrs $m8, $m1, 4
  shr $m9, $m1, 4
  shl $m10, $m1, 4
  sub $m11, 18, $m2
  trap 0
""")
    assert [m(ipu, 0, r) for r in range(1, 12)] == [
        x, y, (x + y) & MASK, (x - y) & MASK, (s32(x) * y) & MASK, x & y, x ^ y,
        (s32(x) >> 4) & MASK, x >> 4, (x << 4) & MASK, (18 - y) & MASK]


def test_compares_min_max_and_bit_counts() -> None:
    ipu = run("""
.text
.supervisor
_start:
  setzi $m1, 5
  sub $m2, 0, $m1
  cmpslt $m3, $m2, $m1
  cmpult $m4, $m2, $m1
  cmpeq $m5, $m1, 5
  cmpne $m6, $m1, $m2
  max $m7, $m2, $m1
  min $m8, $m2, $m1
  clz $m9, $m1
  popc $m10, $m2
  abs $m11, $m2
  trap 0
""")
    minus5 = (-5) & MASK
    assert [m(ipu, 0, r) for r in range(2, 12)] == [
        minus5, 1, 0, 1, 1, 5, minus5, 29, bin(minus5).count("1"), 5]


def test_abs_of_the_most_negative_integer_is_zero() -> None:
    """Graphcore's LLVM back end: the abs instruction returns 0 for INT_MIN
    (ColossusISelLowering.cpp, why ISD::ABS is not legal there)."""
    ipu = run("""
.text
.supervisor
_start:
  setzi $m1, 1
  shl $m1, $m1, 31
  abs $m2, $m1
  sub $m3, 0, $m1
  add $m3, $m3, 1
  abs $m4, $m3
  trap 0
""")
    assert [m(ipu, 0, r) for r in (2, 3, 4)] == [0, 0x80000001, 0x7FFFFFFF]


def test_loads_and_stores_of_every_width_and_step_forms() -> None:
    ipu = run("""
.text 0x40000
.supervisor
_start:
  setzi $m1, data
  ld32 $m2, $m1, $m15, 0
  ldz16 $m3, $m1, $m15, 1
  lds16 $m4, $m1, $m15, 1
  ldz8 $m5, $m1, $m15, 3
  lds8 $m6, $m1, $m15, 3
  setzi $m7, out
  st32 $m2, $m7, $m15, 1
  setzi $m8, 0
  st32step $m3, $m7, $m8+=, 2
  st32step $m4, $m7, $m8+=, 2
  stm32 $m8, $m7, $m15
  trap 0
.data 0x60000
data:
  .word 0x80F1A2B3
out:
  .word 0, 0, 0, 0, 0
""")
    assert [m(ipu, 0, r) for r in range(2, 7)] == [0x80F1A2B3, 0x80F1, (0x80F1 - 0x10000) & MASK, 0x80,
                                                   (0x80 - 0x100) & MASK]
    out = 0x60004
    assert memory_word(ipu, 0, out + 4) == 0x80F1A2B3
    assert memory_word(ipu, 0, out) == 16  # stm32 $m8 (after two steps of 2 words) at out + 0
    assert memory_word(ipu, 0, out + 8) == (0x80F1 - 0x10000) & MASK
    assert m(ipu, 0, 8) == 16


def test_branches_calls_and_brnzdec() -> None:
    ipu = run("""
.text
.supervisor
_start:
  setzi $m1, 4
  setzi $m2, 0
loop:
  call $m10, twice
  brnzdec $m1, loop
  setzi $m5, 0
  sub $m6, 0, $m1
  brneg $m6, never
  brz $m5, skip
  setzi $m3, 99
skip:
  brpos $m5, never
  trap 0
twice:
  add $m2, $m2, 2
  br $m10
never:
  setzi $m4, 1
  trap 1
""")
    assert m(ipu, 0, 2) == 2 * 5 and m(ipu, 0, 3) == 0 and m(ipu, 0, 4) == 0
    assert reg(ipu, "EXC_CAUSE") == ExceptionCause.BREAKPOINT


def test_workers_runall_exit_and_local_sync() -> None:
    ipu = run("""
.text
.supervisor
_start:
  setzi $m0, worker
  setzi $m1, 0x61000
  runall $m0, $m1, 1
  sync 2
  get $m2, $CTXT_STS
  get $m3, $SSR
  trap 0
.align 8
.worker
worker:
  get $m1, $WSR
  and $m1, $m1, 7
  st32 $m1, $m13, $m15, 0
  exitz $m15
""")
    # worker n stores its index at vertex base 0x61000 + n*4
    assert [memory_word(ipu, 0, 0x61000 + 4 * n) for n in range(6)] == list(range(6))
    assert m(ipu, 0, 2) == 1  # only the supervisor active when it read CTXT_STS
    assert m(ipu, 0, 3) & 1 == 1  # every exit handed over status 1 ($SSR.LC)


def test_rpt_repeats_its_body() -> None:
    ipu = run(one_worker("""
  setzi $m2, 0
  rpt 5, 0
  { add $m2, $m2, 3 ; fnop }
  st32 $m2, $m13, $m15, 0
""", vertex=0x61000))
    # run adds the memory base: 0x61000 + 0x40000 aliases back onto 0x61000 (bit 18 up masked off)
    assert ipu.tiles.canonical(0x61000 + BASE) == 0x61000
    assert memory_word(ipu, 0, 0x61000) == 5 * 3


def test_get_put_tile_id_and_dbg_data() -> None:
    ipu = run("""
.text
.supervisor
_start:
  get $m1, $TILE_ID
  put $DBG_DATA, $m1
  trap 0
""", tiles=(0, 7))
    assert tdi_read(ipu, 7, TdiRegister.DBG_DATA) == 7
    assert m(ipu, 7, 1) == 7


def test_misaligned_store_is_an_exception_with_tile_address_and_context() -> None:
    ipu = run("""
.text
.supervisor
_start:
  setzi $m1, 0x60002
  st32 $m1, $m1, $m15, 0
  trap 0
""", tiles=(3,))
    assert (reg(ipu, "EXC_CAUSE"), reg(ipu, "EXC_TILE"), reg(ipu, "EXC_ADDRESS"), reg(ipu, "EXC_CONTEXT")) == (
        ExceptionCause.MISALIGNED, 3, 0x60002, 0)
    assert ipu.interrupts.raised[Interrupt.EXCEPTION] == 1
    assert tdi_read(ipu, 3, TdiRegister.CTXT_STS) == Status.EXCEPTED


def test_an_instruction_without_public_semantics_is_a_named_exception() -> None:
    ipu = run("""
.text
.supervisor
_start:
  send 1, 6, 3
""")
    assert reg(ipu, "EXC_CAUSE") == ExceptionCause.NOT_EXECUTABLE
    assert any("send" in e.detail for e in ipu.execution.events)


#: Each tile counts down 50 x its id, then syncs internally and with the host.
SYNCS = """
.text
.supervisor
_start:
  get $m1, $TILE_ID
  mul $m2, $m1, 50
loop:
  brnzdec $m2, loop
  sync 3
  sync 4
  trap 0
"""


def test_internal_and_external_syncs() -> None:
    ipu = run(SYNCS, tiles=(0, 1, 2))
    assert ipu.host_sync.counts[1] == 1 and ipu.interrupts.raised[Interrupt.GS1_E0] == 1
    turns = [ipu.execution.states[t].turns for t in (0, 1, 2)]
    again = run(SYNCS, tiles=(0, 1, 2), budget=7)
    again.execution.run(10**6)
    assert [again.execution.states[t].turns for t in (0, 1, 2)] == turns  # deterministic, whatever the slices


@st.composite
def bsp_programs(draw: st.DrawFn) -> str:
    """Supervisors that start every worker (runall), wait a while that
    differs from tile to tile, and sync: with their workers (local), and
    before or after that with every tile (internal) or not, for one to
    three steps; the workers count down for as long as drawn."""
    steps = []
    for s in range(draw(st.integers(1, 3))):
        syncs = draw(st.sampled_from([(2,), (2, 3), (3, 2)]))
        steps.append(f"""
  setzi $m0, worker{s % 2}
  setzi $m1, 0x61000
  runall $m0, $m1, 0
  get $m5, $TILE_ID
  mul $m6, $m5, {draw(st.integers(0, 9))}
wait{s}:
  brnzdec $m6, wait{s}
""" + "".join(f"  sync {zone}\n" for zone in syncs))
    counts = [draw(st.integers(0, 40)) for _ in range(2)]
    return ".text 0x40000\n.supervisor\n_start:\n" + "".join(steps) + "  trap 0\n" + "".join(f"""
.align 8
.worker
worker{w}:
  setzi $m2, {n}
count{w}:
  brnzdec $m2, count{w}
  exitz $m15
""" for w, n in enumerate(counts))


@settings(max_examples=25, deadline=None)
@given(bsp_programs())
def test_the_turns_are_the_same_whatever_the_slices_and_the_path(source: str) -> None:
    tiles = (0, 1, 2, 3)

    def turns(budget: int, native: bool) -> list[int]:
        ipu = run_until_idle(source, tiles, budget, native)
        assert reg(ipu, "EXC_CAUSE") == ExceptionCause.BREAKPOINT  # each step's sync, then the trap
        return [ipu.execution.states[t].turns for t in tiles]

    expected = turns(10**6, native=True)
    for budget, native in ((1, True), (7, True), (97, True), (10**6, False), (13, False)):
        assert turns(budget, native) == expected, (budget, native)


def test_an_internal_sync_ends_no_earlier_than_a_member_that_left_without_arriving() -> None:
    # Tiles 0 and 2 reach sync 3 early; tile 1 counts down 200 and traps
    # instead. The others stood still until it left, so their clocks go on
    # from its clock then, whatever the slices and the path.
    source = """
.text 0x40000
.supervisor
_start:
  get $m1, $TILE_ID
  cmpeq $m3, $m1, 1
  brnz $m3, leaver
  mul $m4, $m1, 20
early:
  brnzdec $m4, early
  sync 3
  get $m5, $SCOUNT_L
  setzi $m2, 0x60000
  st32 $m5, $m2, $m15, 0
  trap 0
leaver:
  setzi $m4, 200
count:
  brnzdec $m4, count
  trap 0
"""
    for budget, native in ((10**6, True), (1, True), (13, False)):
        ipu = run_until_idle(source, (0, 1, 2), budget, native)
        left = ipu.execution.states[1].turns  # its trap was its last turn
        assert [memory_word(ipu, t, 0x60000) for t in (0, 2)] == [left + 1] * 2, (budget, native)  # sync, then get


def test_an_exception_raised_from_outside_wakes_the_executor() -> None:
    # Tile 0's workers spin while its supervisor waits at sync 3, which tile
    # 1 never joins (it waits at sync 4): nothing can run. An exception
    # raised for tile 0's supervisor by the host's path (the fault API, the
    # TDI) lets its workers run again, and the daemon's runner must hear.
    source = """
.text 0x40000
.supervisor
_start:
  get $m1, $TILE_ID
  brnz $m1, other
  setzi $m0, worker
  setzi $m3, 0x61000
  runall $m0, $m3, 1
  sync 3
  trap 0
other:
  sync 4
  trap 0
.align 8
.worker
worker:
  bri worker
"""
    ipu = run_until_idle(source, (0, 1), 500, calls=20)
    assert not ipu.execution.busy()
    woken = []
    ipu.execution.wake = lambda: woken.append(True)
    ipu.raise_exception(ExceptionCause.INJECTED, 0, 0, 0)
    assert ipu.execution.busy() and woken


def test_injection_rules_and_reset() -> None:
    ipu = run("""
.text
.supervisor
_start:
  bri _start
""", budget=100)
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, word("setzi_mmmn_zi", 1, 5)) == TdiResult.NOT_QUIESCENT
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) & TdiStatus.CNQ
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, word("setzi_mmmn_zi", 1, 5)) == TdiResult.TDI_ERROR
    assert tdi_write(ipu, 0, TdiRegister.TDI_CLR, int(TdiStatus.CNQ)) == TdiResult.OK
    ipu.reset()
    assert not ipu.execution.running and tdi_read(ipu, 0, TdiRegister.CTXT_STS) == 0
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, word("sync_mmmn_zi", 3)) == TdiResult.UNSUPPORTED


def test_every_running_tile_gets_turns_whatever_the_budget() -> None:
    # Tiles 0-3 spin; tile 5 must still reach its trap in small budgets.
    source = """
.text
.supervisor
_start:
  get $m1, $TILE_ID
  cmpeq $m1, $m1, 5
  brz $m1, spin
  trap 0
spin:
  bri spin
"""
    ipu = run(source, tiles=(0, 1, 2, 3, 5), budget=100)
    for _ in range(10):
        ipu.execution.run(100)
    assert reg(ipu, "EXC_TILE") == 5 and reg(ipu, "EXC_CAUSE") == ExceptionCause.BREAKPOINT


def test_64_bit_logic_on_a_pairs() -> None:
    ipu = run(one_worker("""
  ld64 $a0:1, $m13, $m15, 0
  ld64 $a2:3, $m13, $m15, 1
  and64 $a4:5, $a0:1, $a2:3
  or64 $a6:7, $a0:1, $a2:3
  st64 $a4:5, $m13, $m15, 2
  st64 $a6:7, $m13, $m15, 3
  andc64 $a4:5, $a0:1, $a2:3
  not64 $a6:7, $a0:1
  st64 $a4:5, $m13, $m15, 4
  st64 $a6:7, $m13, $m15, 5
""", vertex=0x60000, data="  .word 0xF0F0F0F0, 0x12345678, 0xFF00FF00, 0x0F0F0F0F" + ", 0" * 8))
    x, y = 0x12345678F0F0F0F0, 0x0F0F0F0FFF00FF00
    got = [memory_word(ipu, 0, 0x60010 + 4 * i) | memory_word(ipu, 0, 0x60014 + 4 * i) << 32 for i in range(0, 8, 2)]
    assert got == [x & y, x | y, x & ~y & (1 << 64) - 1, ~x & (1 << 64) - 1]


def test_a_load_of_a_word_with_bad_parity_faults_and_a_store_rewrites_it() -> None:
    source = """
.text 0x40000
.supervisor
_start:
  setzi $m1, 0x60000
  st32 $m1, $m1, $m15, 2
  ld32 $m2, $m1, $m15, 2
  ld32 $m3, $m1, $m15, 0
  trap 0
"""
    ipu = make()
    program = assemble(source)
    load(ipu, program)
    ipu.tiles.mark_bad_parity(0, 0x60008)  # rewritten by the st32 before the ld32 reads it
    ipu.tiles.mark_bad_parity(0, 0x60000)
    start(ipu, program.entry)
    ipu.execution.run(1000)
    assert (reg(ipu, "EXC_CAUSE"), reg(ipu, "EXC_ADDRESS")) == (ExceptionCause.PARITY, 0x60000)
    assert m(ipu, 0, 2) == 0x60000


def test_every_encoding_is_executed_or_named_as_not_public() -> None:
    pending = [r.variant for r in ROWS if r.variant not in SEMANTICS and "yet" in why_not(r.mnemonic)]
    assert pending == []  # docs/execution.md: every other public encoding is executed


def test_every_rule_names_a_row_of_the_instruction_table() -> None:
    """A rule keyed by a variant no row has would never run: a typo, or a
    row renamed in the table without its rule."""
    variants = {r.variant for r in ROWS}
    assert sorted(set(SEMANTICS) - variants) == []
