# The daemon's executor task: runs the tiles of every IPU in bounded
# slices in the trio loop, never on the FUSE request loop. Each IPU's slice
# is a unit of work (ipufs/driver/work.py: under the daemon lock, then the
# slice's effects, signals and page-cache copies, carried out), emits
# program events to the trace, and lets go of the lock so that requests
# are served between slices. Idle (no context can take a
# turn) it sleeps until an IPU wakes it: a program started through the
# TDI, a host sync completing. After each IPU's slice, at most SETTLE_S
# apart during a burst of starts, and every SAMPLE_S while the figures
# fall back to idle, it samples how many tiles have an
# active context into the IPU's utilisation (utilisation.py), which the
# model shows as UTILISATION and IPU_POWER. docs/execution.md.
from __future__ import annotations

import trio

from ipufs.daemon.utilisation import Utilisation
from ipufs.driver.devices import DeviceSet
from ipufs.driver.events import EventSink, ProgramEvent
from ipufs.driver.work import DeviceWork
from ipufs.model.ipu import Ipu

#: turns per IPU per slice: a slice costs about a millisecond (docs/performance.md)
SLICE_TURNS = 500
#: the pause between slices, in which the FUSE reader takes the lock
BREATHE_S = 0.0002
#: how long the host's starts must have paused before tiles take turns:
#: a host starts tiles one TDI command at a time, and tiles that ran
#: before the last was started could complete a sync without it (a sync
#: waits for the tiles running: docs/execution.md)
SETTLE_S = 0.05
#: how often the utilisation is sampled while no tile takes turns but the
#: figures are not idle (tiles waiting at a sync, or a window still
#: holding work done): they move at most this late
SAMPLE_S = 0.05


class ExecutionRunner:
    """Steps the running tiles of ``devices`` while any can run."""

    def __init__(self, devices: DeviceSet, work: DeviceWork, tracer: EventSink, utilisation: Utilisation, *,
                 slice_turns: int = SLICE_TURNS) -> None:
        self.devices = devices
        self.work = work
        self.tracer = tracer
        self.utilisation = utilisation
        self.lock = work.lock
        self.slice_turns = slice_turns
        self._token: trio.lowlevel.TrioToken | None = None
        self._wanted = trio.Event()
        self._started = 0.0  # trio's clock when a tile was last started

    def _wake(self, started: bool) -> None:
        """May be called from any thread holding the lock (a TDI command in
        the FUSE reader): the loop picks it up."""
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._woke, started)
            except trio.RunFinishedError:
                pass

    def _woke(self, started: bool) -> None:
        if started:
            self._started = trio.current_time()
        self._wanted.set()

    def _slice(self) -> bool:
        """One slice over every IPU; returns whether any context can still run."""
        busy = False
        for index, ipu in enumerate(self.devices.ipus):
            # Per IPU: a request waits for one IPU's slice at most.
            busy = self.work.act(index, lambda: self._run(index, ipu)) or busy
        return busy

    def _sample(self, index: int, ipu: Ipu) -> None:
        ipu.set_utilisation(self.utilisation.sample(index, len(ipu.execution.running)))

    def _sample_all(self) -> None:
        for index, ipu in enumerate(self.devices.ipus):
            self.work.act(index, lambda: self._sample(index, ipu))

    def _run(self, index: int, ipu: Ipu) -> bool:
        execution = ipu.execution
        if not execution.running:
            self._sample(index, ipu)  # its figures fall back while others run
            return False
        execution.run(self.slice_turns)
        self._sample(index, ipu)
        if execution.events:
            if self.tracer.enabled:
                for e in execution.events:
                    self.tracer.emit(ProgramEvent(index, e.kind, e.tile, e.context, e.pc, e.detail))
            execution.events.clear()
        return execution.busy()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run tiles until cancelled."""
        self._token = trio.lowlevel.current_trio_token()
        with self.lock:
            for ipu in self.devices.ipus:
                ipu.execution.wake = self._wake
        task_status.started()
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
                while True:
                    # A burst of starts, running or not: let it end first.
                    while trio.current_time() - self._started < SETTLE_S:
                        await trio.sleep_until(self._started + SETTLE_S)
                        self._sample_all()  # a long burst: the figures keep moving
                    if not self._slice():
                        break
                    await trio.sleep(BREATHE_S)
        finally:
            self._token = None
            with self.lock:
                for ipu in self.devices.ipus:
                    ipu.execution.wake = None
