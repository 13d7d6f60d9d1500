# The host's side of the executor: which tiles a sync waits for (the tiles
# running and those the host has named through DBG_IOWNER), injections that
# show TDI_STS.BUSY until the executor retires them, and a reset that sets
# the tiles' state aside for sweep() (docs/execution.md).
from __future__ import annotations

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import TdiResult
from ipufs.model.executor.state import Status, Wait
from ipufs.model.ipu import Ipu
from ipufs.model.debug import TdiRegister, TdiStatus
from tests.model.executor.kit import BASE, assemble, load, tdi_read, tdi_write, word
from tests.model.test_ipu import make

#: every tile syncs internally, then with the host (GS1: signal 46), then stops
SYNCS = """
.text
.supervisor
_start:
  get $m1, $TILE_ID
  sync 3
  sync 4
  trap 0
"""
BRI = word("bri_mmmn_zi", BASE)


def _loaded(source: str, tiles: tuple[int, ...]) -> Ipu:
    ipu = make()
    load(ipu, assemble(source), tiles)
    return ipu


def _name(ipu: Ipu, tiles: tuple[int, ...], context: int = 0) -> None:
    for tile in tiles:
        assert tdi_write(ipu, tile, TdiRegister.DBG_IOWNER, context) == TdiResult.OK


def _stop_and_inject(ipu: Ipu, tile: int) -> None:
    """The first half of a start: the supervisor stopped by DBG_RBRK, the
    branch to its entry injected (busy until the executor retires it)."""
    assert tdi_write(ipu, tile, TdiRegister.DBG_RBRK, 1) == TdiResult.OK
    assert tdi_write(ipu, tile, TdiRegister.DBG_IEXEC, BRI) == TdiResult.OK


def _go(ipu: Ipu, tile: int) -> None:
    """The second half: the injection retired, DBG_RBRK cleared, DBG_ECLR starts it."""
    ipu.execution.run(0)
    assert tdi_read(ipu, tile, TdiRegister.TDI_STS) == 0
    assert tdi_write(ipu, tile, TdiRegister.DBG_RBRK, 0) == TdiResult.OK
    assert tdi_write(ipu, tile, TdiRegister.DBG_ECLR, 1) == TdiResult.OK


def _start_one(ipu: Ipu, tile: int) -> None:
    _stop_and_inject(ipu, tile)
    _go(ipu, tile)


def test_a_sync_waits_for_every_named_tile_started_one_at_a_time() -> None:
    tiles = (0, 1, 2, 3)
    ipu = _loaded(SYNCS, tiles)
    _name(ipu, tiles)
    for n, tile in enumerate(tiles):
        _start_one(ipu, tile)
        ipu.execution.run(10**6)  # the started tiles run as far as they can
        if n < len(tiles) - 1:
            assert ipu.host_sync.counts[1] == 0 and not ipu.interrupts.raised[Interrupt.GS1_E0]
            waiting = {ipu.execution.states[t].supervisor.wait for t in tiles[: n + 1]}
            assert waiting == {Wait.INTERNAL}
    assert ipu.host_sync.counts[1] == 1 and ipu.interrupts.raised[Interrupt.GS1_E0] == 1


def test_a_tile_released_before_it_starts_stops_counting() -> None:
    for release in ("worker", "stopped and let go", "reset"):
        ipu = _loaded(SYNCS, (0, 1))
        _name(ipu, (0, 1))
        _start_one(ipu, 0)
        ipu.execution.run(10**6)
        assert ipu.host_sync.counts[1] == 0
        if release == "worker":
            _name(ipu, (1,), context=1)  # DBG_IOWNER names a worker: the supervisor is no longer named
        elif release == "stopped and let go":  # stopped, read, let go with nowhere to run: inactive again
            assert tdi_write(ipu, 1, TdiRegister.DBG_RBRK, 1) == TdiResult.OK
            assert tdi_write(ipu, 1, TdiRegister.DBG_IEXEC, word("put_mmmn_zi", 0x70, 1)) == TdiResult.OK
            ipu.execution.run(0)
            assert tdi_write(ipu, 1, TdiRegister.DBG_RBRK, 0) == TdiResult.OK
            assert 1 in ipu.debug.named  # a read does not start it: still a member
            assert tdi_write(ipu, 1, TdiRegister.DBG_ECLR, 1) == TdiResult.OK
            assert tdi_read(ipu, 1, TdiRegister.CTXT_STS) == Status.INACTIVE
        else:
            ipu.reset()
            assert not ipu.debug.named and not ipu.execution.states
            return
        ipu.execution.run(10**6)
        assert ipu.host_sync.counts[1] == 1, release
        assert ipu.execution.states[0].supervisor.wait is Wait.NONE


def test_naming_a_running_supervisor_does_not_hold_syncs_back() -> None:
    ipu = _loaded(SYNCS, (0, 1))
    _name(ipu, (0, 1))
    for tile in (0, 1):
        _start_one(ipu, tile)
    ipu.execution.run(1)  # both started, neither at its sync yet
    _name(ipu, (0,))  # the host names tile 0 again while it runs
    ipu.execution.run(10**6)
    assert ipu.host_sync.counts[1] == 1 and not ipu.debug.named


def test_an_injection_is_busy_until_the_executor_retires_it() -> None:
    ipu = _loaded(SYNCS, (0,))
    _name(ipu, (0,))
    _stop_and_inject(ipu, 0)
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.BUSY
    assert tdi_read(ipu, 0, TdiRegister.CTXT_STS) == Status.EXCEPTED  # stopped, not started
    # TDI_CLR clears error flags, not BUSY; a second injection while busy is refused with DBLE
    assert tdi_write(ipu, 0, TdiRegister.TDI_CLR, 0xF) == TdiResult.OK
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.BUSY
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, BRI) == TdiResult.TDI_ERROR
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.BUSY | TdiStatus.DBLE
    ipu.execution.run(0)  # the executor's next slice retires it, taking no turn
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.DBLE
    assert tdi_read(ipu, 0, TdiRegister.CTXT_STS) == Status.EXCEPTED  # the branch gave it a PC, no more
    assert ipu.execution.states[0].supervisor.pc == BASE and ipu.execution.states[0].turns == 0
    assert tdi_write(ipu, 0, TdiRegister.TDI_CLR, int(TdiStatus.DBLE)) == TdiResult.OK
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == 0
    assert tdi_write(ipu, 0, TdiRegister.DBG_RBRK, 0) == TdiResult.OK
    assert tdi_write(ipu, 0, TdiRegister.DBG_ECLR, 1) == TdiResult.OK
    assert tdi_read(ipu, 0, TdiRegister.CTXT_STS) == Status.ACTIVE
    # refused at once, never busy: an active supervisor; an inactive one without RBRK
    # (A114 hover/$DBG_IEXEC.md); sync
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, BRI) == TdiResult.NOT_QUIESCENT
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.CNQ
    ipu.reset()
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, BRI) == TdiResult.NOT_QUIESCENT
    assert tdi_write(ipu, 0, TdiRegister.TDI_CLR, int(TdiStatus.CNQ)) == TdiResult.OK
    assert tdi_write(ipu, 0, TdiRegister.DBG_RBRK, 1) == TdiResult.OK
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, word("sync_mmmn_zi", 3)) == TdiResult.UNSUPPORTED
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.INV


def test_an_injection_that_faults_on_an_excepted_context_sets_inv_when_it_retires() -> None:
    ipu = _loaded(".text\n.supervisor\n_start:\n  setzi $m3, 0x60002\n  trap 0\n", (0,))
    _name(ipu, (0,))
    _start_one(ipu, 0)
    ipu.execution.run(100)
    assert tdi_read(ipu, 0, TdiRegister.CTXT_STS) == Status.EXCEPTED
    # a load from a misaligned address faults; on an excepted context that is a TDI error
    load32 = assemble(".text\n.supervisor\n_start:\n  ld32 $m1, $m3, $m15, 0\n").sections[0].data[:4]
    assert tdi_write(ipu, 0, TdiRegister.DBG_IEXEC, int.from_bytes(load32, "little")) == TdiResult.OK
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.BUSY
    ipu.execution.run(0)
    assert tdi_read(ipu, 0, TdiRegister.TDI_STS) == TdiStatus.INV


def test_a_reset_sets_tile_state_aside_and_sweep_frees_it() -> None:
    tiles = tuple(range(8))
    ipu = _loaded(".text\n.supervisor\n_start:\n  bri _start\n", tiles)
    _name(ipu, tiles)
    for tile in tiles:
        _start_one(ipu, tile)
    ipu.execution.run(100)
    ipu.reset()
    ex = ipu.execution
    assert not ex.states and not ex.running and not ipu.debug.injections and not ipu.debug.debug
    assert all(tdi_read(ipu, t, TdiRegister.CTXT_STS) == 0 for t in tiles)
    # 8 tiles' contexts and 8 tiles' TDI registers, freed 3 at a time
    assert [ex.sweep(3) for _ in range(6)] == [True] * 5 + [False]


def test_the_native_loop_takes_the_syncs_with_the_host_itself() -> None:
    """sync 4 (GS1) in the C loop, as on the Python path: every tile waits
    at it, the IPU raises GS1 once, and all go on; no turn of the
    program goes to Python."""
    source = SYNCS.replace("trap 0", "add $m2, $m1, 7\nspin:\n  bri spin")
    tiles = (0, 1, 2, 3)
    results = []
    for native in (True, False):
        ipu = _loaded(source, tiles)
        ipu.execution.native = native
        _name(ipu, tiles)
        for tile in tiles:
            _stop_and_inject(ipu, tile)
        ipu.execution.run(0)  # the injected branches retire
        retired = ipu.execution.interpreter.retired
        for tile in tiles:
            _go(ipu, tile)
        ipu.execution.run(1000)
        ex = ipu.execution
        assert ipu.host_sync.counts[1] == 1 and ipu.interrupts.raised[Interrupt.GS1_E0] == 1
        assert all(ex.states[t].supervisor.wait is Wait.NONE and ex.states[t].supervisor.m[2] == t + 7 for t in tiles)
        assert native is False or ex.interpreter.retired == retired  # C took every turn, sync 4's too
        results.append([ex.states[t].turns for t in tiles])
    assert results[0] == results[1]
