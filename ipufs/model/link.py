# The IPU's PCIe link errors that the link corrects itself (replayed
# transfers): what gc-info prints as "link correctable error count" and
# its "(session)" figure. ipufs's link never errs by itself; the
# `link-errors` fault adds some (docs/faults.md). Times are the caller's
# (the model reads no clocks), so the count during an attachment can be
# told from the times the errors came at.
from __future__ import annotations

from collections import deque

#: How many separate reports of errors are kept with their times (the
#: total is exact whatever the number; a session figure older than the
#: oldest kept report counts from that report on).
KEPT = 4096


class LinkErrors:
    """Correctable link errors, counted since the daemon started."""

    def __init__(self) -> None:
        self.total = 0
        #: False while the device's monitoring is stopped: errors then go uncounted (monitoring.py)
        self.counting = True
        self._reports: deque[tuple[float, int]] = deque(maxlen=KEPT)

    def add(self, count: int, at: float) -> None:
        """``count`` errors at time ``at`` (the caller's clock, increasing);
        not counted while monitoring is stopped."""
        if count < 0:
            raise ValueError(f"a count of link errors is never negative ({count})")
        if not self.counting:
            return
        self.total += count
        self._reports.append((at, count))

    def between(self, start: float, end: float | None) -> int:
        """The errors from ``start`` to ``end`` (None: until now)."""
        return sum(n for at, n in self._reports if at >= start and (end is None or at <= end))
