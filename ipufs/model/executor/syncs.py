# The syncs of one IPU's tiles and who takes part in them. LOCAL (sync 2)
# waits within a tile for its workers; INTERNAL (sync 3) and the external
# zones wait for every member of the IPU: the running tiles' active
# supervisors, and the tiles the host named (DBG_IOWNER = the supervisor)
# and has not started yet. An internal sync ends when every member waits
# at it, and all go on from the latest arrival's clock; an external one is
# requested of the IPU's host sync machinery (GS1/GS2) once every member
# waits on the same zone, and ends when that completes. A tile that ran
# `sans N` has N + 1 syncs armed ($ANS_DCOUNT): it counts as arrived at
# each, running or waiting at `sync 1`, which ends when none is left
# (inferred). When a sync ends, so does the exchange phase it closed
# (exchange.py). docs/execution.md, "Syncs with the host", "Exchange" and
# "Timing (ours)".
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ipufs.model.executor import native
from ipufs.model.executor.csr import ANS_DCOUNT
from ipufs.model.executor.ports import Debugger, Device
from ipufs.model.executor.state import WAIT_CODES, Status, TileState, Wait

if TYPE_CHECKING:
    from ipufs.model.executor.exchange import Exchange

#: wait as the arrays hold it
_INTERNAL, _EXTERNAL, _ANS = WAIT_CODES[Wait.INTERNAL], WAIT_CODES[Wait.EXTERNAL], WAIT_CODES[Wait.ANS]
_ACTIVE = int(Status.ACTIVE)


class Syncs:
    """The sync state of one IPU's tiles."""

    def __init__(self, arrays: native.Arrays, running: native.RunningTiles, device: Device,
                 debugger: Debugger, exchange: Exchange) -> None:
        self.arrays = arrays
        self.running = running
        self.device = device
        self.debugger = debugger
        self.exchange = exchange
        #: tiles with syncs armed by `sans` ($ANS_DCOUNT > 0)
        self.armed: set[int] = set()
        #: the zone requested of the host sync machinery, until it completes
        self.external: int | None = None
        #: the latest clock at which a member tile's supervisor stopped
        #: since the last internal sync ended (it ends no earlier)
        self.left = 0

    def reset(self) -> None:
        self.external = None
        self.left = 0
        self.armed.clear()

    def arm(self, t: TileState, syncs: int) -> None:
        """`sans`: ``t`` counts as arrived at the next ``syncs`` syncs."""
        csrs = t.supervisor.csrs
        csrs[ANS_DCOUNT] = min(csrs[ANS_DCOUNT] + syncs, 0x7FFFF)  # a 19-bit count
        self.armed.add(t.tile)

    def _stand_ins(self) -> list[int]:
        """Members with syncs armed that wait at no sync of the IPU: they
        count as arrived."""
        f = self.arrays.fields
        return [tile for tile in self.armed if tile in self.running and f[tile, 0, native.STATUS] == _ACTIVE
                and f[tile, 0, native.WAIT] not in (_INTERNAL, _EXTERNAL)]

    def _passed(self) -> list[int]:
        """A sync passed: every armed member has one fewer armed; those
        left with none that wait at `sync 1` go on (returned)."""
        gone = []
        csrs, f = self.arrays.csrs, self.arrays.fields
        for tile in sorted(self.armed):
            if tile not in self.running:
                continue
            csrs[tile, 0, ANS_DCOUNT] -= 1
            if not csrs[tile, 0, ANS_DCOUNT]:
                self.armed.discard(tile)
                if f[tile, 0, native.WAIT] == _ANS:
                    f[tile, 0, native.WAIT] = native.WAIT_NONE
                    gone.append(tile)
        return gone

    def leaves(self, t: TileState) -> None:
        """``t``'s supervisor stops: a member leaves the syncs, and an
        internal sync the others wait at ends no earlier than now."""
        if t.supervisor.status is Status.ACTIVE and t.tile in self.running:
            self.left = max(self.left, t.turns)

    @staticmethod
    def release_local(t: TileState) -> bool:
        """End ``t``'s LOCAL sync if its workers have all stopped."""
        s = t.supervisor
        if s.wait is Wait.WORKERS and all(w.status is not Status.ACTIVE for w in t.contexts[1:]):
            s.wait = Wait.NONE
            return True
        return False

    def internal_due(self, counts: list[int]) -> bool:
        """Whether every member waits at an internal sync, which settle()
        then ends (``counts``: native.Loop.scan's)."""
        members = counts[native.MEMBERS]
        if members <= 0 or self.debugger.named:
            return False
        arrived = counts[native.INTERNAL]
        return arrived == members or bool(self.armed) and arrived + len(self._stand_ins()) == members

    def settle(self, counts: list[int], states: Mapping[int, TileState],
               refused: Callable[[int, list[int]], None]) -> bool:
        """End the internal sync every member has reached, or request the
        external zone every member waits on (``refused(zone, tiles)`` when
        the IPU refuses it). Returns whether a context was released."""
        members = counts[native.MEMBERS]  # the running tiles' active supervisors
        if not members or self.debugger.named:  # a named tile not yet started has not arrived
            return False
        supervisors = self.arrays.fields[:, 0]
        if self.internal_due(counts):
            # Every member goes on from the latest arrival's clock: the
            # tiles stood still meanwhile (docs/execution.md, "Timing").
            tiles = self.running.order()
            waiting = tiles[supervisors[tiles, native.WAIT] == _INTERNAL].tolist()
            stand_ins = self._stand_ins() if self.armed else []
            self.exchange.end_phase(waiting + stand_ins)
            waiting = [tile for tile in waiting if supervisors[tile, native.WAIT] == _INTERNAL]  # not faulted
            released = np.array(waiting + self._passed(), np.int64)
            clocks = self.arrays.counters[:, native.TURNS]
            if len(released):
                clocks[released] = max(int(clocks[released].max()), self.left)
                supervisors[released, native.WAIT] = native.WAIT_NONE
            self.left = 0
            return True
        others = len(self._stand_ins()) if self.armed else 0
        if self.external is None and counts[native.EXTERNAL] and counts[native.EXTERNAL] + others == members:
            tiles = self.running.order()
            waiting = tiles[supervisors[tiles, native.WAIT] == _EXTERNAL].tolist()
            zones = {states[tile].supervisor.wait_zone for tile in waiting}
            if len(zones) == 1:
                zone = self.external = zones.pop()
                if not self.device.request_sync(zone):
                    self.external = None
                    refused(zone, sorted(self.running))
                    return True
                return self.external is None
        return False

    def completed(self, zone: int, states: Mapping[int, TileState]) -> bool:
        """The IPU's host sync on ``zone`` completed: the tiles waiting on it
        go on. Returns whether it was theirs."""
        if self.external != zone:
            return False
        self.external = None
        waiting = [tile for tile in sorted(self.running) if states[tile].supervisor.wait is Wait.EXTERNAL
                   and states[tile].supervisor.wait_zone == zone]
        self.exchange.end_phase(waiting + (self._stand_ins() if self.armed else []))
        for tile in waiting:
            s = states[tile].supervisor
            if s.wait is Wait.EXTERNAL:
                s.wait = Wait.NONE
        self._passed()
        return True
