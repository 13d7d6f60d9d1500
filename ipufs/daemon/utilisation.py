# Utilisation from what the tiles run (docs/execution.md, "Utilisation and
# power"; the model is ipufs's own). The executor counts which tiles have an
# active context (Execution.running: what CTXT_STS shows as active, running
# or waiting at a sync); the daemon samples that count with its clock after
# each slice it runs and while the figures fall back to idle, and holds it
# constant between samples. The integral over time is tile-seconds busy:
#
#     utilisation = busy tile-seconds in the last WINDOW_S / (tiles * WINDOW_S)
#     session     = busy tile-seconds since the attachment began (or during
#                   the last one) / (tiles * its duration)
#
# Pure arithmetic on the times it is given, so that tests feed counts and
# check the figures exactly.
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ipufs.model.power import FULL

#: (start, end) of an attachment, end None while it goes on (monotonic times:
#: AttachmentTable.session)
Session = tuple[float, float | None]

#: The sliding window of UTILISATION and `ipu utilisation`, in seconds.
WINDOW_S = 1.0


class TileTime:
    """One IPU's busy tile-time, sampled: ``sample(now, tiles busy)`` at
    increasing times (seconds, the caller's clock). Before the first sample
    nothing was busy."""

    def __init__(self, tiles: int, now: float, window: float = WINDOW_S) -> None:
        self.tiles = tiles
        self.window = window
        #: the cumulative busy tile-seconds C(t) is linear between marks:
        #: (t, C(t), tiles busy from t on); marks older than the window
        #: are dropped but for the one the window starts in
        self._marks: deque[tuple[float, float, int]] = deque([(now, 0.0, 0)])
        self._pinned: dict[float, float] = {}  # C(t) kept for times sessions ask about

    @property
    def level(self) -> int:
        """Tiles busy as last sampled."""
        return self._marks[-1][2]

    def cumulative(self, t: float) -> float | None:
        """Busy tile-seconds up to ``t`` (None: ``t`` is older than what is
        kept and was not pinned)."""
        if t in self._pinned:
            return self._pinned[t]
        marks = self._marks
        if t < marks[0][0]:
            return None
        when, total, level = marks[-1]
        if t < when:  # from the front: the window's start lies in the first mark's span
            for i in range(len(marks) - 1):
                if marks[i + 1][0] > t:
                    when, total, level = marks[i]
                    break
        return total + level * (t - when)

    def sample(self, now: float, busy: int, pin: tuple[float, ...] = ()) -> None:
        """``busy`` tiles are busy from ``now`` on. ``pin``: times whose
        cumulative figure must stay known (the starts and ends of the
        sessions still reported); others pinned before are forgotten."""
        marks = self._marks
        self._pinned = {t: c for t in pin if (c := self.cumulative(t)) is not None and t <= now}
        when, total, level = marks[-1]
        if busy != level:
            marks.append((now, total + level * (now - when), busy))
        while len(marks) > 1 and marks[1][0] <= now - self.window:
            marks.popleft()

    def utilisation(self, now: float) -> float:
        """The busy share (0..1) of the tile-time in the window ending ``now``."""
        start = now - self.window
        begin = self.cumulative(max(start, self._marks[0][0]))
        end = self.cumulative(now)
        assert begin is not None and end is not None
        return max(0.0, min(1.0, (end - begin) / (self.tiles * self.window)))

    def between(self, start: float, end: float) -> float | None:
        """The busy share (0..1) of the tile-time from ``start`` to ``end``;
        None when ``start`` was neither kept nor pinned."""
        first, last = self.cumulative(start), self.cumulative(end)
        if first is None or last is None:
            return None
        if end <= start:
            return 0.0
        return max(0.0, min(1.0, (last - first) / (self.tiles * (end - start))))

    def idle(self, now: float) -> bool:
        """Nothing busy now, and nothing in the window."""
        return self.level == 0 and self.utilisation(now) == 0.0


class Utilisation:
    """Every IPU's busy tile-time, sampled by the daemon's executor task and
    read by the control channel. ``sessions(ipu)``: the IPU's current or
    last attachment (or None); ``clock``: monotonic seconds, the clock the
    attachments are timed with."""

    def __init__(self, tiles: int, ipus: int, sessions: Callable[[int], Session | None], *,
                 clock: Callable[[], float] = time.monotonic, window: float = WINDOW_S) -> None:
        now = clock()
        self.sessions = sessions
        self.clock = clock
        self.ipus = [TileTime(tiles, now, window) for _ in range(ipus)]

    def sample(self, ipu: int, busy: int) -> int:
        """``busy`` tiles of ``ipu`` have an active context now: the IPU's
        utilisation over the window, in UTILISATION's hundredths of a percent."""
        now = self.clock()
        session = self.sessions(ipu)
        pins = () if session is None else tuple(t for t in session if t is not None)
        tile_time = self.ipus[ipu]
        tile_time.sample(now, busy, pins)
        return round(tile_time.utilisation(now) * FULL)

    def session(self, ipu: int) -> float | None:
        """The busy share (0..1) of the current attachment's tile-time, or
        the last one's; None when ``ipu`` was never attached."""
        session = self.sessions(ipu)
        if session is None:
            return None
        start, end = session
        return self.ipus[ipu].between(start, self.clock() if end is None else end)

    def idle(self) -> bool:
        """No IPU has a tile busy or anything busy in its window: the
        figures stay as they are until a tile starts."""
        now = self.clock()
        return all(t.idle(now) for t in self.ipus)
