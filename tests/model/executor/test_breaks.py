# Breakpoints that fire (docs/execution.md, "Breakpoints"): instruction
# breaks ($DBG_IBRK0_*), data breaks ($DBG_DBRK0_*), the host's retirement
# breaks (TDI DBG_RBRK, DBG_RBRK_VERT) and `trap`'s patched breaks; each
# stops its context EXCEPTED with its ETYPE, $DBG_BRK_ID and the EXC_*
# registers, and the host resumes it with an injected branch. Programs are
# assembled with the project's assembler and started as a host starts them.
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipufs.abi.registers import ExceptionCause, TdiResult
from ipufs.model.debug import breaks
from ipufs.model.executor import csr
from ipufs.model.executor.state import Etype, Status
from ipufs.model.ipu import Ipu
from ipufs.model.debug import TdiRegister, TdiStatus
from tests.model.executor.kit import assemble, load, m, memory_word, start, tdi_read, tdi_write, word
from tests.model.executor.test_native import CODE, DATA as ANY_DATA, WORDS, _run, _same, program
from tests.model.test_ipu import make, reg

DATA = 0x60000  # as test_native's


def _ready(source: str, *, rbrk: int | None = None, rbrk_vert: int = 0, native: bool | None = None) -> tuple[Ipu, int]:
    """An ipu1 with ``source`` loaded on tile 0 and started (DBG_RBRK
    written first when given); returns it and the program's labels' base."""
    ipu = make()
    ipu.execution.native = native
    program = assemble(source)
    load(ipu, program)
    if rbrk is not None:
        assert tdi_write(ipu, 0, TdiRegister.DBG_RBRK_VERT, rbrk_vert) == TdiResult.OK
        assert tdi_write(ipu, 0, TdiRegister.DBG_RBRK, rbrk) == TdiResult.OK
    start(ipu, program.entry)
    return ipu, program.entry


def _stopped(ipu: Ipu, context: int = 0) -> tuple[Etype, int, int, int]:
    """The break a context took: its ETYPE, the EXC_CAUSE and EXC_ADDRESS
    raised, and its PC; the IPU's exception is cleared for the next."""
    c = ipu.execution.states[0].contexts[context]
    assert c.status is Status.EXCEPTED
    assert (tdi_read(ipu, 0, TdiRegister.CTXT_STS) >> 2 * context) & 3 == 2  # EXCEPTED_DBG
    held = Etype((c.sr >> 4) & 0xF), reg(ipu, "EXC_CAUSE"), reg(ipu, "EXC_ADDRESS"), c.pc
    assert reg(ipu, "EXC_CONTEXT") == context
    ipu.clear_exception()
    return held


def _resume(ipu: Ipu, pc: int, context: int = 0) -> None:
    """What a host does: a branch to where the context stopped, injected
    through DBG_IEXEC into the excepted context."""
    assert tdi_write(ipu, 0, TdiRegister.DBG_IOWNER, context) == TdiResult.OK
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, word("bri_mmmn_zi", pc)) == TdiResult.OK


def _brk_id(ipu: Ipu, context: int = 0) -> int:
    return ipu.execution.states[0].contexts[context].csrs[0x71]


#: the supervisor sets an instruction break on `here` (ENS), then sums 1..5 in a loop through it
IBRK_LOOP = """
.text 0x40000
.supervisor
_start:
  setzi $m1, here
  put $DBG_IBRK0_PC, $m1
  setzi $m1, 1
  put $DBG_IBRK0_CTL, $m1
  setzi $m2, 0
  setzi $m3, 4
loop:
  add $m2, $m2, 1
here:
  add $m4, $m4, $m2
  brnzdec $m3, loop
  put $DBG_DATA, $m4
  trap 0
"""


@pytest.mark.parametrize("native", [True, False])
def test_an_instruction_break_stops_before_the_instruction_and_a_resume_goes_on(native: bool) -> None:
    ipu, entry = _ready(IBRK_LOOP, native=native)
    here = entry + 4 * 7
    ipu.execution.run(10_000)
    sums = []
    for _ in range(5):  # once per pass of the loop
        etype, cause, address, pc = _stopped(ipu)
        assert (etype, cause, address, pc) == (Etype.IBRK, ExceptionCause.BREAKPOINT, here, here)
        assert _brk_id(ipu) == csr.IBRK_CHANNEL
        sums.append(m(ipu, 0, 4))  # not yet added: the break comes before the instruction
        _resume(ipu, pc)
        ipu.execution.run(10_000)
    assert sums == [0, 1, 3, 6, 10]
    etype, cause, _, _ = _stopped(ipu)  # the trap at the end
    assert (etype, cause) == (Etype.PBRK0, ExceptionCause.BREAKPOINT)
    assert ipu.execution.debug_data(0) == 15


def test_a_worker_instruction_break_with_vertex_match_stops_only_that_vertex() -> None:
    source = """
.text 0x40000
.supervisor
_start:
  setzi $m1, target
  put $DBG_IBRK0_PC, $m1
  setzi $m1, 0x61010
  put $DBG_IBRK0_VERT, $m1
  setzi $m1, 6
  put $DBG_IBRK0_CTL, $m1
  setzi $m0, worker
  setzi $m1, 0x21000
  run $m0, $m1, 0
  setzi $m1, 0x21010
  run $m0, $m1, 0
  sync 2
  trap 0
.align 8
.worker
worker:
  setzi $m2, 7
target:
  st32 $m2, $m13, $m15, 0
  exitz $m15
"""
    ipu, _ = _ready(source)
    ipu.execution.run(10_000)
    t = ipu.execution.states[0]
    # worker 1 (vertex 0x61000) stored and exited; worker 2 (0x61010) stopped at target
    assert memory_word(ipu, 0, 0x61000) == 7 and memory_word(ipu, 0, 0x61010) == 0
    assert t.contexts[1].status is Status.INACTIVE
    etype, _, address, pc = _stopped(ipu, 2)
    assert etype is Etype.IBRK and address == pc == t.contexts[2].pc
    _resume(ipu, pc, 2)
    ipu.execution.run(10_000)
    assert memory_word(ipu, 0, 0x61010) == 7
    assert _stopped(ipu)[0] is Etype.PBRK0  # the supervisor's trap after sync 2


#: the supervisor watches 8 bytes at DATA + 8 ($DBG_DBRK0_CTL as given), then loads and stores around them
def _dbrk(ctl: int) -> str:
    return f"""
.text 0x40000
.supervisor
_start:
  setzi $m1, {DATA + 8}
  put $DBG_DBRK0_BASE, $m1
  setzi $m1, {ctl & 0xFFFFF}
  or $m1, $m1, {ctl & 0xFFF00000}
  put $DBG_DBRK0_CTL, $m1
  setzi $m5, {DATA}
  setzi $m2, 9
  st32 $m2, $m5, $m15, 1
  ld32 $m3, $m5, $m15, 4
  st32 $m2, $m5, $m15, 3
  ld32 $m3, $m5, $m15, 2
  trap 0
"""


CTXT_SUPERVISOR = 1 << breaks.CTXT_SHIFT
SIZE_8 = 3 << breaks.SIZE_SHIFT


@pytest.mark.parametrize("native", [True, False])
def test_a_data_break_stops_a_store_before_it_writes_and_a_load_before_it_reads(native: bool) -> None:
    ipu, entry = _ready(_dbrk(breaks.MSTNI | breaks.MLD | SIZE_8 | CTXT_SUPERVISOR), native=native)
    ipu.execution.run(10_000)
    etype, cause, address, pc = _stopped(ipu)  # st32 at DATA + 12: in [DATA + 8, DATA + 16)
    assert (etype, cause, address, pc) == (Etype.DBRK, ExceptionCause.BREAKPOINT, DATA + 12, entry + 4 * 9)
    assert _brk_id(ipu) == csr.DBRK_CHANNEL and memory_word(ipu, 0, DATA + 12) == 0
    assert memory_word(ipu, 0, DATA + 4) == 9  # the store before, outside the range, was done
    _resume(ipu, pc)
    ipu.execution.run(10_000)
    etype, _, address, pc = _stopped(ipu)  # the load at DATA + 8
    assert (etype, address, pc) == (Etype.DBRK, DATA + 8, entry + 4 * 10)
    assert memory_word(ipu, 0, DATA + 12) == 9  # the resumed store went through
    _resume(ipu, pc)
    ipu.execution.run(10_000)
    assert _stopped(ipu)[0] is Etype.PBRK0


def test_a_data_break_matches_only_its_accesses_and_contexts() -> None:
    for ctl in (breaks.MLD | SIZE_8 | CTXT_SUPERVISOR,  # loads only: the store at DATA + 12 passes
                breaks.MSTNI | breaks.MLD | SIZE_8 | CTXT_SUPERVISOR << 1,  # worker 1 only
                breaks.MSTNI | breaks.MLD | (2 << breaks.SIZE_SHIFT) | CTXT_SUPERVISOR):  # 4 bytes: DATA + 8 only
        ipu, entry = _ready(_dbrk(ctl))
        ipu.execution.run(10_000)
        etype, _, address, pc = _stopped(ipu)
        if ctl & CTXT_SUPERVISOR << 1:
            assert etype is Etype.PBRK0  # nothing watched for the supervisor
        else:
            assert (etype, address, pc) == (Etype.DBRK, DATA + 8, entry + 4 * 10), hex(ctl)
            assert memory_word(ipu, 0, DATA + 12) == 9


def test_data_break_fields_whose_meaning_is_not_public_fault_the_put() -> None:
    ipu, entry = _ready(_dbrk(breaks.SIC | breaks.MLD | CTXT_SUPERVISOR))
    ipu.execution.run(10_000)
    etype, cause, address, _ = _stopped(ipu)
    assert (etype, cause, address) == (Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, entry + 4 * 4)
    assert "SIC" in ipu.execution.events[-1].detail


@pytest.mark.parametrize("native", [True, False])
def test_retirement_breaks_single_step_the_supervisor(native: bool) -> None:
    source = ".text 0x40000\n.supervisor\n_start:\n  setzi $m1, 3\nloop:\n  brnzdec $m1, loop\n  sync 3\n  trap 0\n"
    ipu, entry = _ready(source, rbrk=1, native=native)
    pcs = []
    while True:
        ipu.execution.run(10_000)
        etype, cause, address, pc = _stopped(ipu)
        if etype is not Etype.RBRK:
            break
        assert cause == ExceptionCause.BREAKPOINT and address == pc
        pcs.append(pc)
        _resume(ipu, pc)
    loop = entry + 4
    # setzi, then brnzdec taken 3 times and not taken, then the sync (the break once it completes)
    assert pcs == [loop, loop, loop, loop, loop + 4, loop + 8]
    assert etype is Etype.PBRK0
    assert ipu.execution.states[0].instructions == 6  # the trap does not retire


def test_retirement_breaks_with_vertex_match_stop_only_that_worker() -> None:
    source = """
.text 0x40000
.supervisor
_start:
  setzi $m0, worker
  setzi $m1, 0x61000
  runall $m0, $m1, 4
  sync 2
  trap 0
.align 8
.worker
worker:
  add $m2, $m2, 1
  exitz $m15
"""
    # workers 1..6 get vertex bases 0x61000 + 16 (n - 1); EN for every worker, VM_EN: only 0x61020 (worker 3)
    ipu, _ = _ready(source, rbrk=breaks.RBRK_VM_EN | 0x7E, rbrk_vert=0x61020)
    ipu.execution.run(10_000)
    t = ipu.execution.states[0]
    assert [c.status for c in t.contexts[1:]] == [Status.INACTIVE] * 2 + [Status.EXCEPTED] + [Status.INACTIVE] * 3
    etype, _, _, pc = _stopped(ipu, 3)
    assert etype is Etype.RBRK and m(ipu, 0, 2, context=3) == 1
    _resume(ipu, pc, 3)
    ipu.execution.run(10_000)
    assert t.contexts[3].status is Status.INACTIVE
    assert _stopped(ipu)[0] is Etype.PBRK0


def test_rbrk_fields_whose_meaning_is_not_public_are_refused() -> None:
    ipu = make()
    assert tdi_write(ipu, 0, TdiRegister.DBG_RBRK, breaks.RBRK_ATOV | 1) == TdiResult.BAD_VALUE
    assert tdi_read(ipu, 0, TdiRegister.DBG_RBRK) == 0 and tdi_read(ipu, 0, TdiRegister.TDI_STS) & TdiStatus.INV
    assert 0 not in ipu.execution.interpreter.breaks


def test_trap_raises_patched_breakpoint_0_or_1_and_refuses_other_immediates() -> None:
    for n, etype, cause in ((0, Etype.PBRK0, ExceptionCause.BREAKPOINT), (1, Etype.PBRK1, ExceptionCause.BREAKPOINT),
                            (2, Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE)):
        ipu, entry = _ready(f".text 0x40000\n.supervisor\n_start:\n  trap {n}\n")
        ipu.execution.run(100)
        assert _stopped(ipu) == (etype, cause, entry, entry), n


def _words(source: str) -> list[int]:
    data = assemble(".text 0x40000\n.supervisor\n_start:\n" + source).sections[0].data
    return [int.from_bytes(data[at:at + 4], "little") for at in range(0, len(data), 4)]


def test_injected_instructions_ignore_breakpoints() -> None:
    # an instruction break on the entry and a data break on DATA for the supervisor
    source = f"""
.text 0x40000
.supervisor
_start:
  setzi $m1, _start
  put $DBG_IBRK0_PC, $m1
  setzi $m1, 1
  put $DBG_IBRK0_CTL, $m1
  setzi $m1, {DATA}
  put $DBG_DBRK0_BASE, $m1
  setzi $m1, {breaks.MSTNI | SIZE_8 | CTXT_SUPERVISOR}
  put $DBG_DBRK0_CTL, $m1
  trap 0
"""
    ipu, entry = _ready(source)
    ipu.execution.run(100)
    assert _stopped(ipu)[0] is Etype.PBRK0
    assert tdi_write(ipu, 0, TdiRegister.DBG_ECLR, 1) == TdiResult.OK
    assert ipu.execution.states[0].supervisor.status is Status.INACTIVE
    # injected: a store into the watched bytes (not stopped), then a start at the break's PC (not a resume: stopped)
    for w in _words(f"setzi $m1, {DATA}\nsetzi $m2, 5\nst32 $m2, $m1, $m15, 0\n"):
        assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, w) == TdiResult.OK
        ipu.execution.run(0)
        assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == 0
    assert memory_word(ipu, 0, DATA) == 5 and reg(ipu, "EXC_CAUSE") == 0
    assert ipu.execution.states[0].supervisor.status is Status.INACTIVE
    start(ipu, entry)
    ipu.execution.run(100)
    assert _stopped(ipu)[:3] == (Etype.IBRK, ExceptionCause.BREAKPOINT, entry)


@st.composite
def armed(draw: st.DrawFn) -> dict[str, int]:
    """Breakpoints for the random programs of test_native: an instruction
    break somewhere in the first 64 words, a data break over the data, and
    retirement breaks for some contexts."""
    return {
        "ibrk_ctl": draw(st.integers(0, 7)), "ibrk_pc": CODE + 4 * draw(st.integers(0, 63)),
        "ibrk_vert": ANY_DATA + 4 * draw(st.integers(0, 8)),
        "dbrk_ctl": (draw(st.integers(0, 3)) | draw(st.integers(0, 7)) << breaks.SIZE_SHIFT
                     | draw(st.integers(0, 0x7F)) << breaks.CTXT_SHIFT),
        "dbrk_base": ANY_DATA + 4 * draw(st.integers(0, WORDS)),
        "rbrk": draw(st.sampled_from([0, 0, 1, 0x7E, 0x7F])) | draw(st.sampled_from([0, breaks.RBRK_VM_EN])),
        "rbrk_vert": ANY_DATA + 4 * draw(st.integers(0, 8)),
    }


_BREAKS = {Etype.IBRK, Etype.DBRK, Etype.RBRK}


def _arm(ipu: Ipu, tiles: int, b: dict[str, int]) -> None:
    ex = ipu.execution
    for tile in range(tiles):
        t = ex.state(tile)
        for index, key in ((csr.IBRK_PC, "ibrk_pc"), (csr.IBRK_VERT, "ibrk_vert"), (csr.IBRK_CTL, "ibrk_ctl"),
                           (csr.DBRK_BASE, "dbrk_base"), (csr.DBRK_CTL, "dbrk_ctl")):
            csr.write(ex, t, t.supervisor, index, b[key])
        assert tdi_write(ipu, tile, TdiRegister.DBG_RBRK_VERT, b["rbrk_vert"]) == TdiResult.OK
        assert tdi_write(ipu, tile, TdiRegister.DBG_RBRK, b["rbrk"]) == TdiResult.OK


def _resume_breaks(ipu: Ipu, tiles: int) -> None:
    """Every context stopped by a breakpoint is resumed where it stopped."""
    for tile in range(tiles):
        for c in ipu.execution.state(tile).contexts:
            if c.status is Status.EXCEPTED and Etype((c.sr >> 4) & 0xF) in _BREAKS:
                assert tdi_write(ipu, tile, TdiRegister.DBG_IOWNER, c.number) == TdiResult.OK
                assert tdi_write(ipu, tile, TdiRegister.DBG_IEXEC, word("bri_mmmn_zi", c.pc)) == TdiResult.OK
                ipu.execution.run(0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program(), st.sampled_from(["ipu1", "ipu2"]),
       st.lists(st.binary(min_size=4 * WORDS, max_size=4 * WORDS), min_size=1, max_size=2),
       st.lists(st.integers(1, 400), min_size=1, max_size=4), armed())
def test_breakpoints_stop_the_same_turns_native_and_in_python(source: str, profile: str, data: list[bytes],
                                                              slices: list[int], b: dict[str, int]) -> None:
    # armed, every break resumed; then disarmed, and the contexts go on
    ipus = []
    for use_native in (True, False):
        ipu = _run(profile, source, data, [], use_native)
        _arm(ipu, len(data), b)
        for n in range(6):
            if n == 4:  # disarmed: the contexts that broke go on, natively where they can
                _arm(ipu, len(data), dict.fromkeys(b, 0))
            for budget in slices:
                ipu.execution.run(budget)
            _resume_breaks(ipu, len(data))
        ipus.append(ipu)
    _same(ipus[0], ipus[1], len(data))


@pytest.mark.parametrize("native", [True, False])
def test_dbg_brk_id_keeps_the_channel_once_the_breakpoint_is_disarmed(native: bool) -> None:
    # a data break stops the store; resumed, the supervisor disarms it (its turns
    # may go native again) and reads $DBG_BRK_ID: still the data channel's
    source = f"""
.text 0x40000
.supervisor
_start:
  setzi $m5, {DATA}
  put $DBG_DBRK0_BASE, $m5
  setzi $m1, {breaks.MSTNI | SIZE_8 | CTXT_SUPERVISOR}
  put $DBG_DBRK0_CTL, $m1
  setzi $m2, 5
  st32 $m2, $m5, $m15, 0
  put $DBG_DBRK0_CTL, $m15
  get $m6, $DBG_BRK_ID
  put $DBG_DATA, $m6
  trap 0
"""
    ipu, entry = _ready(source, native=native)
    ipu.execution.run(100)
    etype, _, _, pc = _stopped(ipu)
    assert etype is Etype.DBRK and _brk_id(ipu) == csr.DBRK_CHANNEL
    _resume(ipu, pc)
    ipu.execution.run(100)
    assert _stopped(ipu)[0] is Etype.PBRK0
    assert 0 not in ipu.execution.interpreter.breaks
    assert ipu.execution.debug_data(0) == csr.DBRK_CHANNEL


#: worker 1 sums 3 four times in an rpt body and stores the sum at 0x61000
RPT_WORKER = """
.text 0x40000
.worker
worker:
  setzi $m2, 0
  rpt 4, 0
  { add $m2, $m2, 3 ; fnop }
  st32 $m2, $m13, $m15, 0
  exitz $m15
.supervisor
_start:
  setzi $m0, worker
  setzi $m1, 0x21000
  run $m0, $m1, 0
  sync 2
  trap 0
"""


@pytest.mark.parametrize("native", [True, False])
def test_single_stepping_an_rpt_body_runs_it_every_time(native: bool) -> None:
    # a break inside a running rpt keeps the loop: resumed, the body goes on to its count
    ipu, _ = _ready(RPT_WORKER, rbrk=1 << 1, native=native)
    worker = ipu.execution.states[0].contexts[1]
    pcs = []
    ipu.execution.run(100)
    while worker.status is Status.EXCEPTED:
        etype, _, _, pc = _stopped(ipu, 1)
        assert etype is Etype.RBRK
        pcs.append(pc)
        _resume(ipu, pc, 1)
        ipu.execution.run(100)
    body = pcs[0] + 4
    assert pcs == [body - 4, body, body, body, body, body + 8, body + 12]
    assert memory_word(ipu, 0, 0x61000) == 12


def test_a_context_resumed_outside_its_rpt_body_leaves_the_rpt() -> None:
    # stopped in the body, the worker is sent back to its entry: its rpt starts afresh
    ipu, _ = _ready(RPT_WORKER, rbrk=1 << 1)
    ipu.execution.run(100)
    rpt = _stopped(ipu, 1)[3]  # retired the setzi: before the rpt
    _resume(ipu, rpt, 1)
    ipu.execution.run(100)
    assert _stopped(ipu, 1)[3] == rpt + 4  # retired the rpt: in the body
    assert tdi_write(ipu, 0, TdiRegister.DBG_RBRK, 0) == TdiResult.OK
    _resume(ipu, rpt - 4, 1)  # the worker's entry
    ipu.execution.run(100)
    assert _stopped(ipu)[0] is Etype.PBRK0
    assert memory_word(ipu, 0, 0x61000) == 12
