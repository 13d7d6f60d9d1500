# The daemon's lock (the one every request, task and thread that touches
# the devices holds), which the executor task lends to the native loop
# while it runs tiles (Execution.lend_lock): the lock is let go for the
# run, so a request need not wait for a slice to end. Whoever takes it
# meanwhile holds the loop first: every thread of the loop stops at its
# next look at the hold (every 256 turns), with the tiles' state written
# back, and waits; as the lock is let go again, the loop goes on, or ends
# if the model changed under it (a reset, a parity mark, page-cache mode:
# native.Lender). So every holder sees the model as still as before. With
# more than one CPU the tiles are owed as much time as the last hold took:
# a holder that comes sooner waits for the rest first, so requests that
# come back to back leave the tiles at least half the time, and wait at
# most one request's time longer. A request that leaves the tiles alone
# (an ioctl the driver's table marks so) takes the lock quietly: the loop
# is held only if it takes the lock again the usual way (still()).
# docs/executor-speed.md, "In the daemon".
from __future__ import annotations

import _thread
import time
from collections.abc import Callable
from typing import Any

from ipufs.model.executor.native import Loop

#: the longest a holder waits for the tiles' due
DUE_S = 0.001


# typeshed marks _thread.RLock final; CPython lets it be subclassed, and the
# daemon's parts take the lock as a threading.RLock
class TileLock(_thread.RLock):  # type: ignore[misc]
    """A reentrant lock that may be lent to a native loop's run."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0  # how often the owner holds it (only the owner touches it)
        self._lent: tuple[Loop, Callable[[], bool]] | None = None
        self._held = False  # whether the owner holds the lent loop
        self._since = self._resumed = self._last = 0.0
        #: seconds holders held lent loops, added up, and the holds (the runner reads them)
        self.held = 0.0
        self.holds = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not super().acquire(blocking, timeout):
            return False
        self._depth += 1
        try:
            self.still()
        except BaseException:
            self.release()
            raise
        return True

    def acquire_quietly(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take it without holding a lent loop: for what leaves the tiles
        alone. Taking it again the usual way meanwhile holds the loop."""
        if not super().acquire(blocking, timeout):
            return False
        self._depth += 1
        return True

    @property
    def is_lent(self) -> bool:
        """Whether a run has it lent now (the owner of the lock knows for
        as long as it holds it)."""
        return self._lent is not None

    def still(self) -> None:
        """The owner holds the lent loop, if it does not yet."""
        if not self._is_owned():  # type: ignore[attr-defined]  # CPython RLock's; typeshed omits it
            raise RuntimeError("only the lock's owner may hold the loop")
        if self._lent is None or self._held:
            return
        loop = self._lent[0]
        # the tiles' due; on one CPU the scheduler shares it between them
        # and the holder anyway, and a wait would only add to it
        due = self._last - (time.perf_counter() - self._resumed) if loop.cpus > 1 else 0.0
        loop.hold(min(due, DUE_S))
        self._held = True
        self._since = time.perf_counter()

    def release(self) -> None:
        if self._depth == 1 and self._held and self._lent is not None:
            loop, go_on = self._lent
            loop.resume(end=not go_on())
            self._held = False
            self._resumed = time.perf_counter()
            self._last = self._resumed - self._since
            self.held += self._last
            self.holds += 1
        self._depth -= 1
        super().release()

    def __enter__(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.acquire(blocking, timeout)

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def lend(self, loop: Loop, go_on: Callable[[], bool]) -> bool:
        """The owner, holding it once, lets it go while ``loop`` runs
        (native.Lender); false if it holds it more than once."""
        if self._depth != 1:
            return False
        self._lent = (loop, go_on)
        self._resumed, self._last = time.perf_counter(), 0.0
        self._depth = 0
        super().release()
        return True

    def reclaim(self) -> None:
        """The owner that lent it takes it back once the run is over."""
        super().acquire()
        self._depth = 1
        self._lent = None
