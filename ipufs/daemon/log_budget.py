# A budget of log lines per kind of message, so that a client looping on
# reset, attach and detach cannot flood the log (and the disk behind
# journald): each kind (the logger and the message's format string) may
# write BURST lines at once and one every 10 s after that (a token
# bucket); what goes over is counted, and one line says how many similar
# messages were suppressed, with the last of them, once the kind may write
# again or SUMMARY_AFTER seconds later at the latest. docs/systemd.md.
from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: Lines a kind may write at once.
BURST = 20
#: Lines a second a kind may write once its burst is spent (one in 10 s).
RATE = 0.1
#: Seconds after which suppressed lines are summed up at the latest.
SUMMARY_AFTER = 10.0
#: Kinds remembered before the quiet ones are forgotten (messages built
#: with their values in the format string would each be a kind).
_MAX_KINDS = 1024


@dataclass
class _Kind:
    tokens: float
    refilled: float
    suppressed: int = 0
    since: float = 0.0  # when the first suppressed line came
    last: logging.LogRecord | None = None


class LogBudget(logging.Filter):
    """A filter for a handler: keeps each kind of message within its
    budget and writes the summaries through ``handler``."""

    def __init__(self, handler: logging.Handler, *, burst: int = BURST, rate: float = RATE,
                 summary_after: float = SUMMARY_AFTER, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.handler = handler
        self.burst, self.rate, self.summary_after = burst, rate, summary_after
        self.clock = clock
        self.kinds: dict[tuple[str, str], _Kind] = {}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    @classmethod
    def install(cls, handlers: Iterable[logging.Handler]) -> None:
        """Put a budget on each of ``handlers`` that has none, whose
        pending summaries are written when the process exits."""
        for handler in handlers:
            if not any(isinstance(f, LogBudget) for f in handler.filters):
                budget = cls(handler)
                handler.addFilter(budget)
                atexit.register(budget.close)  # before logging's own shutdown (registered earlier)

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "budget_summary", False):
            return True
        now = self.clock()
        key = (record.name, str(record.msg))
        with self._lock:
            kind = self.kinds.get(key)
            if kind is None:
                if len(self.kinds) >= _MAX_KINDS:
                    self._forget_quiet(now)
                kind = self.kinds[key] = _Kind(tokens=self.burst, refilled=now)
            kind.tokens = min(self.burst, kind.tokens + (now - kind.refilled) * self.rate)
            kind.refilled = now
            if kind.tokens < 1:
                if not kind.suppressed:
                    kind.since = now
                kind.suppressed += 1
                kind.last = record
                self._start_timer()
                return False
            kind.tokens -= 1
            summary = self._take_summary(kind, now)
        if summary is not None:
            self.handler.handle(summary)
        return True

    def flush(self) -> None:
        """Write the summary of every kind that has suppressed lines."""
        now = self.clock()
        with self._lock:
            self._timer = None
            summaries = [s for s in (self._take_summary(k, now) for k in self.kinds.values()) if s is not None]
        for summary in summaries:
            self.handler.handle(summary)

    def close(self) -> None:
        """Write what is pending and stop the timer."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.flush()

    def _forget_quiet(self, now: float) -> None:
        """Forget the kinds whose budget is whole again and that owe no
        summary: they are as good as new."""
        for key, kind in list(self.kinds.items()):
            if not kind.suppressed and kind.tokens + (now - kind.refilled) * self.rate >= self.burst:
                del self.kinds[key]

    def _start_timer(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.summary_after, self.flush)
            self._timer.daemon = True
            self._timer.start()

    @staticmethod
    def _take_summary(kind: _Kind, now: float) -> logging.LogRecord | None:
        """The line that sums up ``kind``'s suppressed lines (its count
        starts again at 0); None if there were none."""
        last = kind.last
        if not kind.suppressed or last is None:
            return None
        summary = logging.LogRecord(
            last.name, last.levelno, last.pathname, last.lineno,
            "%d similar messages suppressed in %.0f s; the last: %s",
            (kind.suppressed, max(1.0, now - kind.since), last.getMessage()), None)
        summary.budget_summary = True
        kind.suppressed, kind.last = 0, None
        return summary
