# The daemon's lock lent to the native loop while tiles run (tile_lock.py,
# Execution.lend_lock): a thread that takes it meanwhile finds the tiles
# standing still until it lets go; a reset it makes ends the run, and
# nothing of the old program comes back; the results are those of a run
# with the lock never let go.
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from ipufs.daemon.tile_lock import TileLock
from ipufs.model.executor import native
from ipufs.model.ipu import Ipu
from tests.model.executor.kit import assemble, load, start
from tests.model.executor.test_native import _make

SOURCE = """
.text 0x4c000
.supervisor
_start:
  setzi $m14, 0xa0000
  setzi $m1, {count}
loop:
  ld32 $m4, $m14, $m15, 0
  add $m4, $m4, $m1
  st32 $m4, $m14, $m15, 0
  brnzdec $m1, loop
  sync 3
  trap 0
"""

#: a loop that stores its count for ever
SPIN = ".text 0x4c000\n.supervisor\n_start:\n  setzi $m14, 0xa0000\nloop:\n  add $m1, $m1, 1\n" \
       "  st32 $m1, $m14, $m15, 0\n  bri loop\n"


def _ipu(tiles: int, count: int, threads: int | None = None) -> Ipu:
    ipu = _make("ipu2")
    program = assemble(SOURCE.format(count=count))
    load(ipu, program, tuple(range(tiles)))
    start(ipu, program.entry, tuple(range(tiles)))
    if threads is not None:
        loop = ipu.execution._the_loop()
        loop.parallel_turns = 1 if threads > 1 else 0
    return ipu


def _run_lent(ipu: Ipu, lock: TileLock, budget: int, stop: threading.Event, slice_turns: int | None = None) -> None:
    ipu.execution.lend_lock(lock)
    while not stop.is_set():
        with lock:
            ipu.execution.run(budget, slice_turns or budget)
            if not ipu.execution.busy():
                return


@contextlib.contextmanager
def _lent_run(ipu: Ipu, lock: TileLock, budget: int, slice_turns: int | None = None) -> Iterator[threading.Thread]:
    """A thread that runs ``ipu``'s tiles with ``lock`` lent, stopped and
    joined at the end."""
    stop = threading.Event()
    runner = threading.Thread(target=_run_lent, args=(ipu, lock, budget, stop, slice_turns))
    runner.start()
    try:
        yield runner
    finally:
        stop.set()
        runner.join(60)


def _as_if_never_let_go(lent: Ipu, tiles: int) -> None:
    """The state and memory of ``lent``'s first ``tiles`` are those of the
    same program run with the lock never let go."""
    whole = _ipu(tiles, 1_000_000)
    while whole.execution.busy():
        whole.execution.run(1 << 30)
    for name in ("counters", "fields", "registers", "csrs"):
        assert np.array_equal(getattr(whole.execution.arrays, name)[:tiles],
                              getattr(lent.execution.arrays, name)[:tiles]), name
    window = whole.tiles.window
    assert whole.tiles.exchange.bytes[:tiles * window].tobytes() == lent.tiles.exchange.bytes[:tiles * window].tobytes()


@pytest.mark.parametrize("tiles", [1, 24])
@pytest.mark.timeout(120)
def test_a_holder_finds_the_tiles_still_and_the_results_are_those_of_a_run_never_let_go(tiles: int) -> None:
    lock = TileLock()
    lent = _ipu(tiles, 1_000_000, threads=4)
    holds = still = 0
    with _lent_run(lent, lock, 400_000) as runner:
        while runner.is_alive():
            with lock:
                before = lent.execution.arrays.counters.copy(), lent.execution.arrays.registers.copy()
                time.sleep(0.0002)
                after = lent.execution.arrays.counters, lent.execution.arrays.registers
                still += np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
                holds += 1
            time.sleep(0.0005)
    assert holds > 5 and still == holds  # while held, not a turn was taken
    assert lock.holds > 0  # some of them held the loop mid-run
    _as_if_never_let_go(lent, tiles)


@pytest.mark.timeout(120)
def test_a_reset_made_while_the_lock_is_lent_ends_the_run_and_leaves_nothing_of_it() -> None:
    lock = TileLock()
    ipu = _ipu(16, 1_000_000, threads=4)
    with _lent_run(ipu, lock, 1 << 30) as runner:
        time.sleep(0.05)  # the run is under way, the lock lent
        with lock:
            ipu.reset()
        runner.join(60)
        assert not runner.is_alive()
    ex = ipu.execution
    assert not ex.running and not ex.events and ex.instructions == 0
    # The same IPU then runs a new program as a new IPU does.
    program = assemble(SOURCE.format(count=1000))
    load(ipu, program, (0,))
    start(ipu, program.entry, (0,))
    with lock:
        while ex.busy():
            ex.run(1 << 20)
    fresh = _ipu(1, 1000)
    while fresh.execution.busy():
        fresh.execution.run(1 << 20)
    for name in ("counters", "fields", "registers"):
        assert np.array_equal(getattr(fresh.execution.arrays, name)[:1], getattr(ex.arrays, name)[:1]), name
    assert [e.kind for e in ex.events] == [e.kind for e in fresh.execution.events]


@pytest.mark.timeout(120)
def test_turning_the_native_loop_off_while_the_lock_is_lent_ends_the_run_where_it_was() -> None:
    lock = TileLock()
    ipu = _ipu(2, 1_000_000)
    ipu.execution.lend_lock(lock)

    def flip() -> None:
        time.sleep(0.01)
        with lock:
            ipu.execution.native = False

    other = threading.Thread(target=flip)
    other.start()
    with lock:
        ipu.execution.run(1 << 30, 1 << 30)  # ends when the holder turned the loop off
    other.join(30)
    assert ipu.execution.busy() and ipu.execution.instructions < 2 * 4 * 1_000_000
    ipu.execution.native = None  # on again: it goes on from where the run ended
    while ipu.execution.busy():
        ipu.execution.run(1 << 30)
    whole = _ipu(2, 1_000_000)
    while whole.execution.busy():
        whole.execution.run(1 << 30)
    for name in ("counters", "fields", "registers"):
        assert np.array_equal(getattr(whole.execution.arrays, name)[:2], getattr(ipu.execution.arrays, name)[:2]), name


def test_a_lock_held_twice_is_not_lent() -> None:
    lock = TileLock()
    loop = _ipu(1, 10).execution._the_loop()
    with lock, lock:
        assert not lock.lend(loop, lambda: True)
    with lock:
        assert lock.lend(loop, lambda: True)
        lock.reclaim()
    assert native.GRACE_TURNS > 0


@pytest.mark.timeout(120)
def test_an_injection_made_while_the_lock_is_lent_ends_the_run_and_retires_at_once() -> None:
    """A host starting tiles one by one while others run (inject, poll
    TDI_STS.BUSY) must not wait for the slice in hand to end."""
    from ipufs.abi.registers import TdiResult
    from ipufs.abi.tile_code import TDI_STS_BUSY
    from ipufs.model.debug import TdiRegister
    from tests.model.executor.kit import tdi_read, tdi_write, word

    lock = TileLock()
    ipu = _make("ipu2")
    spin = assemble(".text 0x4c000\n.supervisor\n_start:\n  add $m1, $m1, 1\n  bri _start\n")
    load(ipu, spin, tuple(range(8)))
    start(ipu, spin.entry, tuple(range(8)))  # eight tiles that run until the reset
    program = assemble(SOURCE.format(count=10))
    load(ipu, program, (9,))
    ipu.execution.lend_lock(lock)
    ended = threading.Event()

    def runner() -> None:
        with lock:
            ipu.execution.run(1 << 40, 1 << 40)
        ended.set()

    thread = threading.Thread(target=runner)
    thread.start()
    try:
        time.sleep(0.05)  # the run is under way, the lock lent
        with lock:
            assert tdi_write(ipu, 9, TdiRegister.DBG_IOWNER, 0) == TdiResult.OK
            assert tdi_write(ipu, 9, TdiRegister.DBG_RBRK, 1) == TdiResult.OK
            assert tdi_write(ipu, 9, TdiRegister.DBG_IEXEC, word("bri_mmmn_zi", program.entry)) == TdiResult.OK
            assert tdi_read(ipu, 9, TdiRegister.TDI_STS) & TDI_STS_BUSY
        assert ended.wait(10), "the run went on with an injection waiting"
        with lock:
            ipu.execution.run(0)  # the next slice retires it first, and shows it
            assert not tdi_read(ipu, 9, TdiRegister.TDI_STS) & TDI_STS_BUSY
            assert ipu.execution.running  # the eight still run
    finally:
        with lock:
            ipu.reset()
        thread.join(60)

@pytest.mark.timeout(120)
def test_a_quiet_holder_leaves_the_tiles_running_until_it_takes_the_lock_the_usual_way() -> None:
    lock = TileLock()
    lent = _make("ipu2")
    spin = assemble(SPIN)
    load(lent, spin, tuple(range(8)))
    start(lent, spin.entry, tuple(range(8)))  # they run until the reset below
    lent.execution._the_loop().parallel_turns = 1

    def total() -> int:  # what the loop stored so far, tile 7's
        return int.from_bytes(lent.tiles.read(7, 0xA0000, 4), "little")

    def moves(within: float = 30) -> bool:
        first, deadline = total(), time.monotonic() + within
        while total() == first and time.monotonic() < deadline:
            time.sleep(0.001)
        return total() != first

    with _lent_run(lent, lock, 1 << 40, 1 << 14) as runner:  # one run: the lock stays lent
        assert moves()  # the run is under way

        def quietly_moving() -> bool:
            """Taken quietly while lent, the tiles go on (unless the run
            came back to Python, whose thread then waits for the lock)."""
            for _ in range(200):
                assert lock.acquire_quietly()
                if lock.is_lent and moves(0.05):
                    return True  # and still held
                lock.release()
                time.sleep(0.001)
            return False

        assert quietly_moving()
        try:
            assert lock.holds == 0
            with pytest.raises(RuntimeError, match="owner"):  # another thread cannot hold the loop for it
                other = threading.Thread(target=lambda: _raised_in(lock.still))
                other.start()
                other.join(30)
                raise _RAISED.pop()
            with lock:  # the usual way: now the loop is held
                held = total(), lent.execution.arrays.registers.copy()
                time.sleep(0.005)
                assert total() == held[0] and np.array_equal(lent.execution.arrays.registers, held[1])
                lock.still()  # held already: nothing more
            time.sleep(0.005)
            assert total() == held[0]  # still held until the quiet holder lets go too
        finally:
            lock.release()
        assert lock.holds == 1 and moves()  # let go: the tiles go on
        with lock:
            lent.reset()  # ends the run
        runner.join(60)
        assert not runner.is_alive()


_RAISED: list[BaseException] = []


def _raised_in(call: Callable[[], object]) -> None:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
        _RAISED.append(exc)
