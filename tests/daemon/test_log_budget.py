# The log budget: a flood of one kind of message becomes its burst, a line
# a second, and summaries that count what was left out, with the last of
# it; other kinds keep their own budgets; nothing is lost from the counts.
from __future__ import annotations

import logging

from ipufs.daemon.log_budget import LogBudget


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def budgeted(burst: int = 5, rate: float = 1.0) -> tuple[logging.Logger, Lines, LogBudget, Clock]:
    handler, clock = Lines(), Clock()
    budget = LogBudget(handler, burst=burst, rate=rate, summary_after=3600, clock=clock)
    handler.addFilter(budget)
    logger = logging.getLogger(f"test.log_budget.{id(handler)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger, handler, budget, clock


def test_a_flood_is_its_burst_then_a_summary() -> None:
    log, out, budget, clock = budgeted()
    for i in range(1000):
        log.info("IPU %d reset (by thread %d)", 0, i)
    assert out.lines == [f"IPU 0 reset (by thread {i})" for i in range(5)]
    clock.now = 1.0  # one line's worth later
    log.info("IPU %d reset (by thread %d)", 0, 1000)
    assert out.lines[5:] == ["995 similar messages suppressed in 1 s; the last: IPU 0 reset (by thread 999)",
                             "IPU 0 reset (by thread 1000)"]


def test_kinds_have_budgets_of_their_own() -> None:
    log, out, budget, clock = budgeted(burst=2)
    for i in range(10):
        log.info("IPU %d reset (by thread %d)", 0, i)
        log.info("IPU %d attached to process %d", 0, i)
    assert len(out.lines) == 4
    budget.flush()
    assert sorted(out.lines[4:]) == [
        "8 similar messages suppressed in 1 s; the last: IPU 0 attached to process 9",
        "8 similar messages suppressed in 1 s; the last: IPU 0 reset (by thread 9)"]
    budget.flush()
    assert len(out.lines) == 6  # nothing more owed


def test_a_steady_trickle_within_the_rate_is_never_suppressed() -> None:
    log, out, budget, clock = budgeted(burst=1, rate=2.0)
    for i in range(100):
        clock.now = i * 0.5
        log.info("line %d", i)
    assert len(out.lines) == 100
