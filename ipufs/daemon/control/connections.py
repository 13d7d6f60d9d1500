# The control socket's connections and their deadlines: what each one is
# doing (waiting for a request, part-way through one, leaving its answer
# unread, following a live trace, or not reading that trace), since when,
# and how to end that wait. Every connection counts against the limit,
# whatever it is doing; a newcomer past the limit closes the connection
# that has kept the daemon waiting the longest. A deadline covers a whole
# wait (a whole request line, a whole answer, a whole trace event), so a
# client cannot extend it by trickling bytes. docs/control.md gives the
# limits.
from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import trio


class Activity(enum.Enum):
    """What a connection is waiting on."""

    IDLE = "idle"  #: for the first byte of a request
    RECEIVING = "receiving"  #: for the rest of a request line
    ANSWERING = "answering"  #: for the client to take its answer
    STALLED = "stalled"  #: for the client to take a trace event


#: Waits for the client to read: evicted only once they have lasted the
#: send grace, so a client that reads is never taken for a stalled one.
_SENDING = {Activity.ANSWERING, Activity.STALLED}
#: Seconds a send must have waited before a newcomer may evict it.
SEND_GRACE = 1.0


@dataclass(eq=False)
class Connection:
    """One served connection: what it waits on, since when, and the cancel
    scope that ends the wait (None while the daemon works for it)."""

    activity: Activity = Activity.IDLE
    since: float = 0.0
    scope: trio.CancelScope | None = None
    #: Set when a newcomer took its place; the wait was cancelled.
    evicted: bool = False

    @contextmanager
    def waiting(self, activity: Activity, deadline: float) -> Iterator[trio.CancelScope]:
        """Wait on ``activity`` until ``deadline`` (trio's clock) at the
        latest; the scope says whether the wait was cut short (by the
        deadline or by eviction, which sets ``evicted``)."""
        with trio.move_on_at(deadline) as scope:
            self.activity, self.since, self.scope = activity, trio.current_time(), scope
            try:
                yield scope
            finally:
                self.scope = None  # working for it, or a trace between events: never evicted


class Connections:
    """The connections served at once, at most ``limit``."""

    def __init__(self, limit: int, send_grace: float = SEND_GRACE) -> None:
        self.limit = limit
        self.send_grace = send_grace
        self.served: set[Connection] = set()

    def __len__(self) -> int:
        return len(self.served)

    def admit(self) -> Connection | None:
        """A slot for a new connection, evicting the one waited on the
        longest if every slot is taken; None if none can be evicted (every
        connection is a trace that keeps up, or is being answered)."""
        if len(self.served) >= self.limit and not self._evict():
            return None
        connection = Connection(since=trio.current_time())
        self.served.add(connection)
        return connection

    def release(self, connection: Connection) -> None:
        self.served.discard(connection)

    def _evict(self) -> bool:
        now = trio.current_time()
        candidates = [c for c in self.served
                      if c.scope is not None
                      and (c.activity not in _SENDING or now - c.since >= self.send_grace)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda c: c.since)
        victim.evicted = True
        self.served.discard(victim)  # its slot is the newcomer's at once
        assert victim.scope is not None
        victim.scope.cancel()
        return True
