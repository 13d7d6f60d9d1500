# The fault plan in force (ipufs/daemon/plan.py): counts the accesses the
# filesystem reports, fires the faults they trigger, and schedules the
# timed ones. A plan given at start and one loaded later through the
# control socket are started the same way; a new plan replaces the old,
# whose timed faults then fire no more.
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ipufs.daemon.faults import FaultInjector
from ipufs.daemon.plan import Entry, FaultPlan
from ipufs.daemon.timers import Timers


class PlanRunner:
    """Runs one fault plan at a time; the filesystem's access counter
    (ipufs.driver.filesystem.AccessCounter)."""

    def __init__(self, injector: FaultInjector, timers: Timers) -> None:
        self.injector = injector
        self.timers = timers
        self.plan: FaultPlan | None = None
        #: Whether the plan in force has faults fired by accesses: the
        #: filesystem calls count() only then.
        self.counting = False
        #: Told when ``counting`` changes (the fast path holds while it is set).
        self.watchers: list[Callable[[], None]] = []

    def count(self, ipu: int) -> None:
        plan = self.plan
        if plan is not None:
            for fault in plan.access(ipu):
                self.injector.apply(fault)

    def start(self, plan: FaultPlan) -> None:
        """Make ``plan`` the one in force: count accesses while it has
        faults that fire on them (a plan of timed faults only, or an empty
        one that clears the last, counts nothing), schedule times."""
        self.plan = plan
        counting = any(entry.at is None for entry in plan.entries)
        if counting != self.counting:
            self.counting = counting
            for watcher in self.watchers:
                watcher()
        for entry in plan.timed():
            self.timers.later(entry.at or 0.0, partial(self._fire, plan, entry))

    def _fire(self, plan: FaultPlan, entry: Entry) -> None:
        if self.plan is plan:
            fault = plan.fire_timed(entry)
            if fault is not None:
                self.injector.apply(fault)
