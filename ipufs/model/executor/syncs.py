# The syncs of one IPU's tiles and who takes part in them. LOCAL (sync 2)
# waits within a tile for its workers; INTERNAL (sync 3) and the external
# zones wait for every member of the IPU: the running tiles' active
# supervisors, and the tiles the host named (DBG_IOWNER = the supervisor)
# and has not started yet. An internal sync ends when every member waits
# at it, and all go on from the latest arrival's clock; an external one is
# requested of the IPU's host sync machinery (GS1/GS2) once every member
# waits on the same zone, and ends when that completes. docs/execution.md,
# "Syncs with the host" and "Timing (ours)".
from __future__ import annotations

from collections.abc import Callable, Mapping

from ipufs.model.executor import native
from ipufs.model.executor.ports import Debugger, Device
from ipufs.model.executor.state import WAIT_CODES, Status, TileState, Wait

#: wait as the arrays hold it
_INTERNAL, _EXTERNAL = WAIT_CODES[Wait.INTERNAL], WAIT_CODES[Wait.EXTERNAL]


class Syncs:
    """The sync state of one IPU's tiles."""

    def __init__(self, arrays: native.Arrays, running: native.RunningTiles, device: Device,
                 debugger: Debugger) -> None:
        self.arrays = arrays
        self.running = running
        self.device = device
        self.debugger = debugger
        #: the zone requested of the host sync machinery, until it completes
        self.external: int | None = None
        #: the latest clock at which a member tile's supervisor stopped
        #: since the last internal sync ended (it ends no earlier)
        self.left = 0

    def reset(self) -> None:
        self.external = None
        self.left = 0

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
        return members > 0 and not self.debugger.named and counts[native.INTERNAL] == members

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
            waiting = tiles[supervisors[tiles, native.WAIT] == _INTERNAL]
            clocks = self.arrays.counters[:, native.TURNS]
            clocks[waiting] = max(int(clocks[waiting].max()), self.left)
            self.left = 0
            supervisors[waiting, native.WAIT] = native.WAIT_NONE
            return True
        if self.external is None and counts[native.EXTERNAL] == members:
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
        for tile in self.running:
            s = states[tile].supervisor
            if s.wait is Wait.EXTERNAL and s.wait_zone == zone:
                s.wait = Wait.NONE
        return True
