# The tile debug unit as a real C600 shows it and Graphcore's TDI text
# states it (docs/debugging.md): RUN_BREAK and EXCEPTION_CLEAR are masks of
# contexts, a stopped context resumes at its PC, injections into the
# supervisor need it stopped, break on sync, CTXT_STS's states 2 and 3 and
# its receive error, the exchange mirrors, and the per-tile block indexed by
# physical tile on the GC200.
from __future__ import annotations

import struct

import pytest

from ipufs.abi.registers import TdiResult
from ipufs.model.debug import TdiRegister as T, TdiStatus
from ipufs.model.executor.state import ERPT, Etype, Status
from ipufs.model.ipu import Ipu
from ipufs.model.profile import PROFILES, Region
from tests.model.executor.kit import assemble, load, m, memory_word, resume, start, tdi_read, tdi_write, word
from tests.model.test_ipu import make, reg, sparse

#: counts $m1 down from 1000, then stores 0x600d at 0x60000 and traps
COUNT = """
.text 0x40000
.supervisor
_start:
  setzi $m1, 1000
loop:
  brnzdec $m1, loop
  setzi $m2, 0x600d
  setzi $m3, 0x60000
  st32 $m2, $m3, $m15, 0
  trap 0
"""


def _running(source: str = COUNT) -> Ipu:
    ipu = make()
    program = assemble(source)
    load(ipu, program)
    start(ipu, program.entry)
    return ipu


def _status(ipu: Ipu, context: int = 0, tile: int = 0) -> int:
    return (tdi_read(ipu, tile, T.CTXT_STS) >> 2 * context) & 3


def test_run_break_stops_a_running_supervisor_and_exception_clear_resumes_it_where_it_stopped() -> None:
    ipu = _running()
    ipu.execution.run(300)
    assert _status(ipu) == Status.ACTIVE
    assert tdi_write(ipu, 0, T.DBG_RBRK, 1) == TdiResult.OK
    assert _status(ipu) == Status.EXCEPTED  # at once: a load right after the store sees it
    s = ipu.execution.states[0].supervisor
    stopped_at, counter = s.pc, s.m[1]
    assert Etype((s.sr >> 4) & 0xF) is Etype.RBRK and 0 < counter < 1000
    ipu.execution.run(10_000)
    assert (s.pc, s.m[1]) == (stopped_at, counter)  # it does not run while stopped
    assert m(ipu, 0, 1) == counter  # read through injections into the stopped supervisor
    assert tdi_write(ipu, 0, T.DBG_RBRK, 0) == TdiResult.OK
    resume(ipu, 0)
    assert _status(ipu) == Status.ACTIVE and s.pc == stopped_at
    ipu.execution.run(10_000)
    assert memory_word(ipu, 0, 0x60000) == 0x600D and Etype((s.sr >> 4) & 0xF) is Etype.PBRK0


def test_run_break_turns_an_inactive_context_excepted_and_clearing_it_leaves_it_inactive() -> None:
    ipu = make()
    assert tdi_write(ipu, 2, T.DBG_RBRK, 0b101) == TdiResult.OK  # the supervisor and worker 2
    assert tdi_read(ipu, 2, T.CTXT_STS) == Status.EXCEPTED | Status.EXCEPTED << 4
    assert tdi_write(ipu, 2, T.DBG_RBRK, 0) == TdiResult.OK
    assert tdi_write(ipu, 2, T.DBG_ECLR, 0b101) == TdiResult.OK  # a mask: both at once
    assert tdi_read(ipu, 2, T.CTXT_STS) == 0  # nothing to run: inactive again
    assert not ipu.execution.running


def test_exception_clear_is_a_mask_of_contexts() -> None:
    ipu = make()
    tdi_write(ipu, 2, T.DBG_RBRK, 0b11)
    tdi_write(ipu, 2, T.DBG_RBRK, 0)
    assert tdi_write(ipu, 2, T.DBG_ECLR, 0b10) == TdiResult.OK  # worker 1 only
    assert tdi_read(ipu, 2, T.CTXT_STS) == Status.EXCEPTED


def test_a_fault_cannot_be_resumed() -> None:
    ipu = _running(".text 0x40000\n.supervisor\n_start:\n  setzi $m1, 0x60002\n  st32 $m1, $m1, $m15, 0\n")
    ipu.execution.run(100)
    assert _status(ipu) == Status.EXCEPTED_NDBG  # a fault is no debug exception: state 3
    resume(ipu, 0)
    assert _status(ipu) == Status.INACTIVE and not ipu.execution.running


def test_the_supervisor_takes_an_injection_only_stopped() -> None:
    # A114 hover/$DBG_IEXEC.md: the supervisor Excepted, or quiescent with RBRK enabled
    ipu = make()
    bri = word("bri_mmmn_zi", 0x40000)
    assert tdi_write(ipu, 0, T.DBG_IEXEC, bri) == TdiResult.NOT_QUIESCENT
    assert tdi_read(ipu, 0, T.TDI_STS) == TdiStatus.CNQ
    assert tdi_write(ipu, 0, T.TDI_CLR, 0x6) == TdiResult.OK  # what a C600 host clears: CNQ stays
    assert tdi_read(ipu, 0, T.TDI_STS) == TdiStatus.CNQ
    tdi_write(ipu, 0, T.TDI_CLR, TdiStatus.CNQ)
    tdi_write(ipu, 0, T.DBG_IOWNER, 3)  # an inactive worker is quiescent
    assert tdi_write(ipu, 0, T.DBG_IEXEC, word("setzi_mmmn_zi", 1, 7)) == TdiResult.OK
    ipu.execution.run(0)
    assert m(ipu, 0, 1, context=3) == 7 and _status(ipu, 3) == Status.INACTIVE


def test_a_branch_injected_into_a_stopped_context_redirects_it_and_breaks_apply_there() -> None:
    ipu = _running()
    ipu.execution.run(300)
    tdi_write(ipu, 0, T.DBG_RBRK, 1)
    s = ipu.execution.states[0].supervisor
    end = assemble(COUNT).symbols["loop"][1] + 4  # the setzi after the loop
    tdi_write(ipu, 0, T.DBG_IOWNER, 0)
    assert tdi_write(ipu, 0, T.DBG_IEXEC, word("bri_mmmn_zi", end)) == TdiResult.OK
    ipu.execution.run(0)
    assert s.pc == end and _status(ipu) == Status.EXCEPTED
    tdi_write(ipu, 0, T.DBG_RBRK, 0)
    resume(ipu, 0)
    ipu.execution.run(100)
    assert memory_word(ipu, 0, 0x60000) == 0x600D and s.m[1] != 0  # the loop was left early


def test_break_on_sync_stops_the_supervisor_at_its_sync_and_a_resume_syncs() -> None:
    source = ".text 0x40000\n.supervisor\n_start:\n  setzi $m1, 5\n  sync 3\n  setzi $m2, 6\n  trap 0\n"
    ipu = make()
    program = assemble(source)
    load(ipu, program)
    assert tdi_write(ipu, 0, T.DBG_ECSR, 1 << 5) == TdiResult.OK  # BREAK_ON_SYNC (the C600's EXCEPTION_STATE)
    assert tdi_read(ipu, 0, T.DBG_ECSR) == 1 << 5
    start(ipu, program.entry)
    ipu.execution.run(100)
    s = ipu.execution.states[0].supervisor
    assert Etype((s.sr >> 4) & 0xF) is Etype.BOS and _status(ipu) == Status.EXCEPTED
    assert s.pc == program.entry + 4 and s.m[1] == 5 and reg(ipu, "EXC_ADDRESS") == s.pc
    resume(ipu, 0)
    ipu.execution.run(100)
    assert s.m[2] == 6 and Etype((s.sr >> 4) & 0xF) is Etype.PBRK0


def test_runall_over_active_workers_faults_each_as_it_retires_its_next_instruction() -> None:
    source = """
.text 0x40000
.supervisor
_start:
  setzi $m0, spin
  setzi $m1, 0x61000
  run $m0, $m1, 0
  runall $m0, $m1, 0
.align 8
.worker
spin:
  add $m2, $m2, 1
  bri spin
"""
    ipu = _running(source)
    ipu.execution.run(100)
    t = ipu.execution.states[0]
    assert t.supervisor.sr & 1 << 3  # $SSR.RAERR (A hover/runall.md)
    assert Etype((t.supervisor.sr >> 4) & 0xF) is Etype.INVALID_OP
    worker = t.contexts[1]
    assert worker.status is Status.EXCEPTED_NDBG and Etype((worker.sr >> 4) & 0xF) is Etype.INVALID_OP
    assert all(w.status is Status.INACTIVE for w in t.contexts[2:])


@pytest.mark.parametrize("native", [True, False])
def test_an_exception_in_an_rpt_body_sets_erpt(native: bool) -> None:
    source = """
.text 0x40000
.supervisor
_start:
  setzi $m0, worker
  setzi $m1, 0x21000
  run $m0, $m1, 0
  sync 2
  trap 0
.align 8
.worker
worker:
  setzi $m3, 0x60002
  rpt 2, 0
  { st32 $m3, $m3, $m15, 0 ; fnop }
  exitz $m15
"""
    ipu = make()
    ipu.execution.native = native
    program = assemble(source)
    load(ipu, program)
    start(ipu, program.entry)
    ipu.execution.run(100)
    worker = ipu.execution.states[0].contexts[1]
    assert worker.sr & ERPT and worker.status is Status.EXCEPTED_NDBG
    assert reg(ipu, "EXC_CONTEXT") == 1 and Etype((worker.sr >> 4) & 0xF) is Etype.INVALID_ADDR


def test_the_exchange_registers_mirror_the_supervisors_csrs_and_ctxt_sts_shows_a_receive_error() -> None:
    ipu = _running()
    t = ipu.execution.states[0]
    t.supervisor.csrs[0xA6], t.supervisor.csrs[0xA9] = 12, 7  # $INCOMING_DCOUNT, $EXCHANGE_CTL
    assert (tdi_read(ipu, 0, T.INCOMING_DCOUNT), tdi_read(ipu, 0, T.EXCHANGE_CTL)) == (12, 7)
    t.receive_error = 3  # TEXCH_RERR_ADDR
    assert tdi_read(ipu, 0, T.CTXT_STS) >> 27 == 3
    assert tdi_write(ipu, 0, T.EXCHANGE_CTL, 1) == TdiResult.BAD_REGISTER  # read-only mirrors


def test_on_the_gc200_the_tile_block_is_indexed_by_physical_tile() -> None:
    # logical tile 2 sits at physical 64 on a C600 (osmarks/ipu-stack topology.rs)
    p = PROFILES["ipu21"]
    ipu = Ipu(p, 0, {r: sparse(p.region_size(r)) for r in Region})
    assert p.tile_map.physical[2] == 64
    at = 0x30000 + 64 * 0x40 + T.DBG_DATA * 4
    assert ipu.write_config(at, struct.pack("<I", 0xD47A)) == 4
    assert tdi_read(ipu, 2, T.DBG_DATA) == 0xD47A  # the aperture numbers tiles logically
    assert struct.unpack("<I", ipu.read_config(0x30000 + 2 * 0x40 + T.DBG_DATA * 4, 4))[0] == 0
    ipu.execution.state(2)
    assert ipu.execution.states[2].supervisor.csrs[0x03] == 64  # $TILE_ID: where the tile sits


def test_adding_a_tdi_register_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe of docs/architecture.md, "Adding a TDI register": a row
    of REGISTERS (here under a free index, as a TdiRegister member would
    give it) is read and written through the aperture, and refused before."""
    from ipufs.model.debug import unit

    ipu = make()
    free = max(T) + 1
    assert tdi_write(ipu, 3, free, 5) == TdiResult.BAD_REGISTER
    row = unit.Register(unit.DebugUnit._held, unit.DebugUnit._hold, "ours: a register that holds what is written")
    monkeypatch.setitem(unit._BY_INDEX, free, row)
    assert tdi_write(ipu, 3, free, 0x1234) == TdiResult.OK
    assert tdi_read(ipu, 3, free) == 0x1234 and tdi_read(ipu, 4, free) == 0
