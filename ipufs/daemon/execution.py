# The daemon's executor task: runs the tiles of every IPU in bounded
# slices in the trio loop, never on the FUSE request loop. Each IPU's slice
# is a unit of work (ipufs/driver/work.py: under the daemon lock, then the
# slice's effects, signals and page-cache copies, carried out), emits
# program events to the trace, and lets go of the lock so that requests
# are served between slices: a request that waits for the lock makes the
# native loop end its run soon (Execution.stop_when) and the task let the
# request's thread take the lock before its next slice. A slice lasts
# about SLICE_S: its turns follow the rate of the last whole one. Each
# slice first retires the instructions injected through the TDI since the
# last (TDI_STS.BUSY until then) and frees some of the tile state a reset
# set aside. Idle (no context can take a turn) it sleeps until an IPU
# wakes it: an injection, a host sync completing, a reset. After each
# IPU's slice, and every SAMPLE_S while the figures fall back to idle, it
# samples how many tiles have an active context into the IPU's
# utilisation (utilisation.py), which the model shows as UTILISATION and
# IPU_POWER. docs/executor-speed.md, docs/execution.md ("Utilisation and
# power").
from __future__ import annotations

import sys
import time

import trio

from ipufs import native
from ipufs.daemon.tile_lock import TileLock
from ipufs.daemon.utilisation import Utilisation
from ipufs.driver.devices import DeviceSet
from ipufs.driver.events import EventSink, ProgramEvent
from ipufs.driver.work import DeviceWork
from ipufs.model.executor import Execution
from ipufs.model.executor.native import LANE_SLICE_S
from ipufs.model.ipu import Ipu

#: turns of an IPU's first slice, in the Python path and in the native loop;
#: then each slice's turns follow the rate of the last whole one
SLICE_TURNS = 500
NATIVE_SLICE_TURNS = 20_000
#: how long a slice of one IPU lasts, about (docs/executor-speed.md)
SLICE_S = 0.002
#: the bounds of a slice's turns
MIN_TURNS, MAX_TURNS = 100, 1 << 30
#: a slice's turns per running tile, at least (a visit to a tile costs about
#: as much as a hundred turns: its state comes into the cache), as long as
#: the slice lasts at most LONGEST slices of the pace
TILE_TURNS = 4096
LONGEST = 5
#: how long the task waits, at most, for a request that waits for the lock
#: to take it before the task takes it again
GIVE_WAY_S = 0.001
#: tiles whose state (dropped by a reset) a slice frees, per IPU
SWEEP_TILES = 32
#: how long a thread may hold the GIL while another waits for it. While
#: tiles run, this task holds it but in the native loop, and a request in
#: the FUSE reader needs it to read, to take the lock and to answer: with
#: CPython's 5 ms each hand-over could cost a RESET 5 ms (docs/executor-speed.md)
SWITCH_INTERVAL_S = 0.0005
#: how often the utilisation is sampled while no tile takes turns but the
#: figures are not idle (tiles waiting at a sync, or a window still
#: holding work done): they move at most this late
SAMPLE_S = 0.05


def slice_turns(execution: Execution) -> int:
    """The turns of a first slice of ``execution``."""
    return NATIVE_SLICE_TURNS if execution.native_on() else SLICE_TURNS


def at_least(execution: Execution, turns: int) -> int:
    """A slice's ``turns`` (the pace's), raised in the native loop so that
    each running tile gets a share worth visiting, up to LONGEST times as
    many (the Python path's pace sets its own)."""
    if not execution.native_on():
        return turns
    return max(turns, min(TILE_TURNS * len(execution.running), LONGEST * turns))


def next_turns(turns: int, taken: int, seconds: float) -> int:
    """The turns of the next slice after one of ``turns`` that took
    ``taken`` in ``seconds``: at the rate of a whole one, SLICE_S; after
    one that ended early (the tiles stopped or synced, a request came),
    as many as before."""
    if taken < turns or seconds <= 0:
        return turns
    return max(MIN_TURNS, min(MAX_TURNS, int(taken * SLICE_S / seconds)))


class ExecutionRunner:
    """Steps the running tiles of ``devices`` while any can run."""

    def __init__(self, devices: DeviceSet, work: DeviceWork, tracer: EventSink, utilisation: Utilisation, *,
                 slice_turns: int | None = None, contended: bytearray | None = None) -> None:
        self.devices = devices
        self.work = work
        self.tracer = tracer
        self.utilisation = utilisation
        self.lock = work.lock
        self.slice_turns = slice_turns  # None: slice_turns(execution)
        #: nonzero while a request waits for the lock (the FUSE reader's):
        #: the task lets it through after the slice in hand
        self.contended = contended if contended is not None else bytearray(1)
        #: the daemon lock, when it may be lent to the native loop while
        #: tiles run (then requests need not wait for a slice to end)
        self.lender = self.lock if isinstance(self.lock, TileLock) else None
        for ipu in devices.ipus:
            ipu.execution.lend_lock(self.lender)
        self._token: trio.lowlevel.TrioToken | None = None
        self._wanted = trio.Event()
        self._turns: dict[int, tuple[bool, int]] = {}  # IPU -> (native, the turns of its next slice)

    def _wake(self) -> None:
        """May be called from any thread holding the lock (a TDI command in
        the FUSE reader): the loop picks it up."""
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._woke)
            except trio.RunFinishedError:
                pass

    def _woke(self) -> None:
        self._wanted.set()  # the event of the moment, read in the loop's thread

    async def _slice(self) -> bool:
        """One slice over every IPU; returns whether any context can still run."""
        busy = False
        for index, ipu in enumerate(self.devices.ipus):
            busy = self.work.act(index, lambda: self._run(index, ipu)) or busy
            if self.contended[0]:  # a request waits for one IPU's slice at most
                await self._give_way()
        return busy

    async def _give_way(self) -> None:
        """A request waits for the lock: let the reader's thread take it
        (GIVE_WAY_S at most) before the next slice does: a released lock
        goes to whoever asks first."""
        deadline = time.perf_counter() + GIVE_WAY_S
        while self.contended[0] and time.perf_counter() < deadline:
            time.sleep(0)  # the GIL goes to the reader, which then takes the lock
        await trio.lowlevel.checkpoint()

    def _held(self) -> float:
        return 0.0 if self.lender is None else self.lender.held

    def _sample(self, index: int, ipu: Ipu) -> None:
        ipu.set_utilisation(self.utilisation.sample(index, len(ipu.execution.running)))

    def _sample_all(self) -> None:
        for index, ipu in enumerate(self.devices.ipus):
            self.work.act(index, lambda: self._sample(index, ipu))

    def _run(self, index: int, ipu: Ipu) -> bool:
        execution = ipu.execution
        swept = execution.sweep(SWEEP_TILES)
        if not execution.running and not ipu.debug.pending():
            self._sample(index, ipu)  # its figures fall back while others run
            return swept
        self._sample(index, ipu)  # busy from the slice's start: a program may end within one
        if self.slice_turns is not None:
            execution.run(self.slice_turns)
        else:
            native = execution.native_on()
            was, turns = self._turns.get(index, (native, slice_turns(execution)))
            if was != native:
                turns = slice_turns(execution)
            turns = at_least(execution, turns)
            held, start = self._held(), time.perf_counter()
            taken = execution.run(turns, turns)
            seconds = time.perf_counter() - start - (self._held() - held)  # not the time others held it
            self._turns[index] = native, next_turns(turns, taken, seconds)
        self._sample(index, ipu)
        if execution.events:
            if self.tracer.enabled:
                for e in execution.events:
                    self.tracer.emit(ProgramEvent(index, e.kind, e.tile, e.context, e.pc, e.detail))
            execution.events.clear()
        return execution.busy() or swept

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run tiles until cancelled."""
        self._token = trio.lowlevel.current_trio_token()
        native.thread_slice(LANE_SLICE_S)  # this thread runs tiles: whatever wakes comes first
        with self.lock:
            for ipu in self.devices.ipus:
                ipu.execution.wake = self._wake
        task_status.started()
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            while True:
                if self.utilisation.idle():
                    await self._wanted.wait()
                else:  # the figures still move: sample them until idle
                    with trio.move_on_after(SAMPLE_S):
                        await self._wanted.wait()
                    if not self._wanted.is_set():
                        self._sample_all()
                        continue
                self._wanted = trio.Event()
                while await self._slice():
                    await trio.lowlevel.checkpoint()  # the daemon's other tasks
        finally:
            sys.setswitchinterval(switch)
            self._token = None
            with self.lock:
                for ipu in self.devices.ipus:
                    ipu.execution.wake = None
