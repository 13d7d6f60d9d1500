# The executor of one IPU: the scheduler. Tiles take turns, one
# instruction (or bundle) per turn, contexts round-robin within a tile;
# run() takes a bounded number of turns in slices across the running
# tiles, in the native loop (native.py) where the semantic rules name a
# native form, and on the Python path (issue.py) otherwise, on the same
# state; after each pass it settles the syncs (syncs.py). Faults and
# breakpoints become tile exceptions raised on the IPU (EXC_*, signal 44).
# The debug unit acts on it through a small interface (debuggee.py).
# Pure: no I/O, no clocks; the daemon calls run() in bounded slices.
# docs/execution.md.
from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import csr, native, system
from ipufs.model.executor.access import TileAccess
from ipufs.model.executor.exchange import Exchange
from ipufs.model.executor.interpreter import Interpreter
from ipufs.model.executor.ports import Debugger, Device
from ipufs.model.executor.state import (
    ERPT, ETYPE_MASK, ETYPE_SHIFT, MASK, Context, Etype, Status, TileFault, TileState, Wait, excepted_status,
)
from ipufs.model.executor.syncs import Syncs
from ipufs.model.fabric import Fabric
from ipufs.model.host_packets import NEUTRAL
from ipufs.model.isa import Arch
from ipufs.model.profile import Profile
from ipufs.model.tiles import TileMemory

#: the breakpoints' ETYPEs: the context stops where a resume can go on (a running rpt stays)
_BREAKS = frozenset({Etype.IBRK, Etype.DBRK, Etype.RBRK})
_MAX_EVENTS = 4096
#: generations of tile state a reset has dropped and sweep() not yet freed;
#: beyond this a reset frees the oldest itself
_MAX_RETIRED = 8


@dataclass(frozen=True, slots=True)
class Event:
    """A program event for the trace: start, exit, exception, sync."""

    kind: str
    tile: int
    context: int
    pc: int
    detail: str


class _Retired:
    """Per-tile state that resets dropped, freed a few tiles at a time:
    freeing thousands of objects at once is what took a reset's time."""

    def __init__(self) -> None:
        self._generations: list[dict[int, Any]] = []

    def keep(self, per_tile: dict[int, Any]) -> bool:
        """Keep ``per_tile`` to free later; returns whether there was any.
        Beyond _MAX_RETIRED generations the oldest goes at once."""
        if not per_tile:
            return False
        self._generations.append(per_tile)
        if len(self._generations) > _MAX_RETIRED:
            del self._generations[0]
        return True

    def free(self, tiles: int) -> bool:
        """Free up to ``tiles`` tiles' state; returns whether some is left."""
        generations = self._generations
        while tiles > 0 and generations:
            old = generations[0]
            for _ in range(min(tiles, len(old))):
                old.popitem()
                tiles -= 1
            if not old:
                del generations[0]
        return bool(generations)


class Execution:
    """Runs the tiles of one IPU (``device``), whose debug unit is ``debugger``."""

    def __init__(self, profile: Profile, tiles: TileMemory, device: Device, debugger: Debugger) -> None:
        self.arch = Arch.named(profile.arch)
        self.memory_base = tiles.base
        self.workers = profile.workers_per_tile
        self.tiles = tiles
        #: each logical tile's $TILE_ID: where it sits (its physical number)
        self.tile_ids = profile.tile_map.physical
        self.device = device
        self.debugger = debugger
        #: every tile's registers, PC, status, turns..., shared by both paths
        self.arrays = native.Arrays(profile.tiles, self.workers + 1)
        #: the native loop: on, off, or None for the process's default (native.enabled())
        self.native: bool | None = None
        self._loop: native.Loop | None = None
        self.states: dict[int, TileState] = {}
        #: tiles with an active context (a tile that stopped leaves at the next settle)
        self.running = native.RunningTiles()
        self.exchange = Exchange(profile, tiles, self._the_loop, lambda: self._loop, self.state, self.fault)
        self.syncs = Syncs(self.arrays, self.running, device, debugger, self.exchange)
        self.arm = self.syncs.arm  # `sans` (ports.Machine)
        # $DBG_DATA and the break CSRs (ports.Machine): the debug unit's
        self.debug_data, self.set_debug_data = debugger.data, debugger.set_data
        self.breaks_changed = debugger.breaks_changed
        self.access = TileAccess(tiles)
        self.load, self.store = self.access.load, self.access.store  # a rule's memory (ports.Machine)
        self.executable, self.require_region1 = self.access.executable, self.access.require_region1
        self.interpreter = Interpreter(self.arch, self.access, self, self.syncs, self.exchange, self.fault)
        self.events: deque[Event] = deque(maxlen=_MAX_EVENTS)
        self._native_retired = 0  # instructions the native loop retired since reset
        #: called when there is work (the daemon wakes its runner): an
        #: injection to retire, a sync released, state to sweep
        self.wake: Callable[[], None] | None = None
        self._retired = _Retired()  # per-tile state resets dropped, for sweep()
        self._cursor = 0  # the tile run() serves first next time
        self._stop: bytearray | None = None  # stop_when
        self._grace = native.GRACE_TURNS
        self._lender: native.Lender | None = None  # lend_lock
        self._epoch = 0  # counts resets: a run that let its lock go goes on only within one

    # --- state -----------------------------------------------------------------
    def state(self, tile: int) -> TileState:
        t = self.states.get(tile)
        if t is None:
            a = self.arrays
            t = self.states[tile] = TileState(tile, self.workers, a.registers[tile], a.fields[tile], a.counters[tile],
                                              a.csrs[tile])
            t.supervisor.csrs[csr.TILE_ID] = self.tile_ids[tile]
            t.supervisor.csrs[csr.INCOMING_MUX] = NEUTRAL  # receiving nothing (ours: the reset is not public)
        return t

    def reset(self) -> None:
        """Every context stops; registers, counters, syncs, breakpoints and
        events are forgotten. The tiles' state objects are set aside, not
        freed: freeing thousands of them is what took a reset's time;
        sweep() frees them later."""
        self.set_aside(self.states)
        self.states = {}
        self.running.clear()
        self.events.clear()
        self.interpreter.breaks.clear()
        self.syncs.reset()
        self.interpreter.retired = self._native_retired = 0
        self._cursor = 0  # tiles are served from the first again, as on a new IPU
        self._epoch += 1
        self.interpreter.forget()  # decoded words go, and their memory with them
        if self._loop is not None:  # (none yet: no exchange either)
            self._loop.forget()
            self.exchange.reset()

    def set_aside(self, per_tile: dict[int, Any]) -> None:
        """Keep ``per_tile`` (state a reset dropped) for sweep() to free."""
        if self._retired.keep(per_tile):
            self._wake()

    def sweep(self, tiles: int) -> bool:
        """Free the state of up to ``tiles`` tiles that resets dropped;
        returns whether some is left."""
        return self._retired.free(tiles)

    def _wake(self) -> None:
        if self.wake is not None:
            self.wake()

    @property
    def instructions(self) -> int:
        """Instructions retired since reset, every tile, both paths."""
        return self.interpreter.retired + self._native_retired

    # --- what the rules use besides memory (ports.Machine) ---------------------------
    def event(self, t: TileState, kind: str, context: int, pc: int, detail: str = "") -> None:
        """A program event: start, exit, exception (a context's state moved), sync."""
        self.events.append(Event(kind, t.tile, context, pc, detail))
        if kind != "sync":  # a context waiting for a sync stays active
            self.debugger.changed.add(t.tile)

    def launch(self, t: TileState, w: Context, entry: int, vertex_base: int) -> None:
        """Start worker ``w`` at ``entry`` (run, runall) in its launch state."""
        s = t.supervisor.csrs
        w.launch(entry, vertex_base, fp_ictl=s[0x20], worker_base=s[0x20 + w.number])
        self.activate(t)
        self.event(t, "start", w.number, entry)

    def start(self, tile: int, entry: int) -> None:
        """The device starts ``tile``'s supervisor at ``entry`` (the
        autoloader's boot: ipufs/model/host_interface.py), whatever it was
        doing; its workers stop."""
        t = self.state(tile)
        t.boot(entry)
        self.exchange.start(t)
        self.debugger.named.discard(tile)  # running: a member as such
        self.debugger.changed.add(tile)
        self.activate(t)
        self.event(t, "start", 0, entry)

    def activate(self, t: TileState) -> None:
        """``t`` has an active context: it takes turns."""
        if t.tile not in self.running:
            self.running.add(t.tile)
            self._wake()

    # --- running -----------------------------------------------------------------------
    def run(self, budget: int, slice_turns: int = 512) -> int:
        """Take up to ``budget`` turns across the running tiles, tile by
        tile in slices; returns the turns taken. Each tile's results and
        turn count do not depend on the budget or slicing. Injections
        accepted since the last call retire first."""
        if self.debugger.pending():
            self.debugger.retire()
            self.debugger.publish()  # a host polling TDI_STS.BUSY need not wait for the slice
        loop = self._native_loop()
        done = 0 if loop is None else self._run_native(loop, budget, slice_turns)
        while loop is None and done < budget and self.running:
            taken = 0
            # The tiles that would take a turn; fair across calls: start
            # after the tile served last, and give each a share of the budget.
            order = self._the_loop().runnable(self.running.order()).tolist()
            first = bisect_left(order, self._cursor) % len(order) if order else 0
            share = max(16, min(slice_turns, (budget - done) // max(1, len(order))))
            for tile in order[first:] + order[:first]:
                taken += self.interpreter.run_tile(self.states[tile], min(share, budget - done - taken))
                self._cursor = tile + 1
                if done + taken >= budget:
                    break
            done += taken
            released = self._settle()
            if not taken and not released:
                break
        if self.debugger.changed:
            self.debugger.publish()
        return done

    def _run_native(self, loop: native.Loop, budget: int, slice_turns: int) -> int:
        """run() in the native loop: the same passes over the running tiles
        as above, so that every turn is taken in the same order; the C loop
        makes them, calling back for the turns it does not take and for
        _settle after a pass in which Python took a turn (a pass without one
        changed nothing _settle reads)."""
        done, more, epoch = 0, True, self._epoch
        while more and done < budget and self.running:
            running = len(self.running)

            def settle() -> tuple[bool, bool]:
                return self._settle(), len(self.running) != running  # it only drops tiles

            taken, cursor, retired, more = loop.run(self.running.order(), slice_turns, budget - done, self._cursor,
                                                    self.interpreter.learn, self._python_turn, settle, self._logged,
                                                    self._lent())
            if epoch != self._epoch:  # reset while the lock was let go: nothing of it counts
                return 0
            self._cursor = cursor
            self._native_retired += retired
            done += taken
        return done

    def _lent(self) -> native.Lent | None:
        """The lock lend_lock() lets go while the C loop runs, whether the
        run may go on after a hold (not after a reset, nor once turns must
        run on the Python path, nor after page-cache mode changed, nor with
        an injection to retire: the next run retires it first), and whether
        the model was reset."""
        if self._lender is None:
            return None
        epoch, dirty = self._epoch, self.tiles.exchange.track_dirty
        return (self._lender,
                lambda: epoch == self._epoch and self.native_on() and dirty == self.tiles.exchange.track_dirty
                and not self.debugger.pending(),
                lambda: epoch != self._epoch)

    def busy(self) -> bool:
        """Whether some context can take a turn now (or will once the
        internal sync every member has reached is released), or an
        injection waits."""
        if self.debugger.pending():
            return True
        if not self.running:
            return False
        counts = self._the_loop().scan(self.running.order())[1]
        return counts[native.RUNNABLE] > 0 or self.syncs.internal_due(counts) or self.exchange.waiting > 0

    def native_on(self) -> bool:
        """Whether turns run in the native loop (Execution.native, else
        IPUFS_NATIVE_EXECUTOR), and may now: not while a parity mark
        exists (loads and fetches check those on the Python path)."""
        return (native.enabled() if self.native is None else self.native) and not self.tiles.bad_parity

    def _native_loop(self) -> native.Loop | None:
        return self._the_loop() if self.native_on() else None

    def _the_loop(self) -> native.Loop:
        if self._loop is None:
            t = self.tiles
            self._loop = native.Loop(self.arrays, t.exchange, t.exchange_base, t.window, t.sram, self.memory_base,
                                     csr.native_ops(self.arch), region1=t.region1 - t.base, bounded=not t.aliasing,
                                     fabric=Fabric.gc200() if self.exchange.has_fabric else None,
                                     stored=t)
            self._loop.stop_when(self._stop, self._grace)
        return self._loop

    def stop_when(self, flag: bytearray | None, grace: int = native.GRACE_TURNS) -> None:
        """End each run() of the native loop early, ``grace`` turns after
        it sees ``flag[0]`` nonzero. Tiles' results do not depend on where
        a run ends."""
        self._stop, self._grace = flag, grace
        if self._loop is not None:
            self._loop.stop_when(flag, grace)

    def lend_lock(self, lender: native.Lender | None) -> None:
        """run() lets ``lender`` (the caller's lock) go while the C loop
        runs tiles, so that other threads need not wait for a slice to end:
        one that takes it holds the loop first (docs/executor-speed.md)."""
        self._lender = lender

    def _settle(self) -> bool:
        """Drop tiles that stopped; complete syncs every member has reached;
        release receivers whose senders caught up; once every tile stopped,
        land the last words. Returns whether a context was released."""
        if not self.running:
            return False
        stopped, counts = self._the_loop().scan(self.running.order())  # one look, in the arrays
        for tile in stopped:
            self.running.discard(tile)
        exchange = self.exchange
        if not self.running:
            exchange.end_phase([])
            return False
        released = self.syncs.settle(counts, self.states, self._sync_refused)
        return exchange.settle() or released

    def _sync_refused(self, zone: int, tiles: list[int]) -> None:
        for tile in tiles:
            t = self.states[tile]
            if t.supervisor.wait is Wait.EXTERNAL:
                self.fault(t, t.supervisor, TileFault(Etype.EXERR, ExceptionCause.SYNC, t.supervisor.pc,
                                                      f"sync {zone}: the IPU's host sync refused it"))

    def sync_completed(self, zone: int) -> None:
        """The IPU's host sync on ``zone`` completed: tiles waiting on it go on."""
        if self.syncs.completed(zone, self.states):
            self._wake()  # a GS2 barrier may complete from another IPU's request

    def _logged(self, kind: int, tile: int, context: int, pc: int, value: int) -> None:
        """A program event of the native loop, for the trace, as the rules log it."""
        t = self.states[tile]
        if kind == native.EVENT_SYNC:
            system.synced(self, t, context, pc, value)
        elif kind == native.EVENT_START:
            self.event(t, "start", context, pc)
        else:
            system.exited(self, t, context, pc, value)

    def _python_turn(self, tile: int) -> None:
        """The turn the native loop hands back: a context of ``tile`` can run."""
        t = self.states[tile]
        c = t.next_runnable()
        assert c is not None, "the native loop hands back only turns a context can take"
        self.interpreter.turn(t, c)

    # --- exceptions ------------------------------------------------------------------------
    def fault(self, t: TileState, c: Context, fault: TileFault) -> None:
        """Context ``c`` takes an exception: it stops, EXCEPTED (a debug
        exception) or EXCEPTED_NDBG, its $SSR/$WSR.ETYPE is set, and the IPU
        raises it (EXC_*, signal 44). A break keeps a running rpt, for a
        resume to go on in it; an exception inside the rpt body is malign
        whatever its type and sets $WSR.ERPT (A hover/rpt.md)."""
        f = c.fields
        in_body = bool(f[native.REPEAT]) and f[native.REPEAT_FIRST] <= c.pc < f[native.REPEAT_END]
        repeat = c.repeat if fault.etype in _BREAKS and not in_body else None
        if c.number == 0:
            self.syncs.leaves(t)
        c.stop()
        c.repeat = repeat
        c.status = Status.EXCEPTED_NDBG if in_body else excepted_status(fault.etype)
        c.sr = (c.sr & ~(ETYPE_MASK | ERPT)) | int(fault.etype) << ETYPE_SHIFT | (ERPT if in_body else 0)
        self.event(t, "exception", c.number, c.pc, f"{fault.etype.name}: {fault}")
        self.device.raise_exception(int(fault.cause), t.tile, fault.address & MASK, c.number)
