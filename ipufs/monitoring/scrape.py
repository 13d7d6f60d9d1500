# One scrape's answer, and how often the IPUs are really read for it. A
# reading asks the daemon first (one `status` request, within
# `daemon_timeout`): a daemon that is gone or does not answer (stopped)
# gives `ipufs_up 0` at once, and its nodes are never touched, since a
# read of a stopped daemon's node waits in the kernel for as long as it
# stays stopped. Otherwise every IPU is read once (reading.py). Scrapes
# within `cache` seconds of a reading get that reading (concurrent ones
# wait for the one under way), so any number of scrapers cost the daemon
# one reading per `cache` seconds. A reading runs in a worker thread; one
# that takes over `read_timeout` (its daemon stopped half-way) is left to
# finish on its own and no other starts meanwhile: scrapes get `ipufs_up 0`
# (reason `stuck`), never a pile of blocked threads.
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import trio
from prometheus_client.core import Metric as Family

from ipufs.client import ControlError, ControlTimeout
from ipufs.deviceplugin.inventory import device_id
from ipufs.monitoring import metrics, reach
from ipufs.monitoring.pods import PodResources, PodResourcesError
from ipufs.monitoring.reading import NO_POD, Pod, Reading, read
from ipufs.problems import Problem
from ipufs.tools import devices

log = logging.getLogger("ipufs")


@dataclass
class Outcome:
    """One reading of the IPUs."""

    ipus: int = 0
    readings: list[Reading] = field(default_factory=list)
    unreadable: list[int] = field(default_factory=list)
    error: str | None = None  # the reason it failed (ipufs_exporter_scrape_errors_total), or None
    pods_up: bool | None = None  # None: the kubelet's socket is not there
    seconds: float = 0.0

    @property
    def up(self) -> bool:
        return self.error is None


def read_all(root: Path, pods: PodResources | None, daemon_timeout: float) -> Outcome:
    """Read every IPU under ``root`` once (blocking: run in a thread)."""
    began = time.perf_counter()
    out = Outcome()
    try:
        views = reach.views(root, daemon_timeout)  # first: a stopped daemon's mount is never asked
        indices = devices.indices(root)
        out.ipus = len(indices)
    except Problem:
        out.error = "daemon_gone"  # no IPUs there: no daemon serves them
    except ControlTimeout as exc:
        out.error = "daemon_timeout"
        log.warning("exporter: %s", exc)
    except (OSError, ControlError, ValueError, KeyError) as exc:
        out.error = "daemon_gone"
        log.info("exporter: the daemon of %s does not answer (%s)", root, exc)
        try:
            out.ipus = len(devices.indices(root)) if reach.mountpoint(root) is None else 0
        except (Problem, OSError):
            pass
    if out.error is None:
        allocated = _pods(pods, out)
        for index in indices:
            try:
                out.readings.append(read(root, index, views.get(index), allocated.get(device_id(index), NO_POD)))
            except OSError as exc:
                log.info("exporter: IPU %d could not be read: %s", index, exc)
                out.unreadable.append(index)
        if indices and not out.readings:
            out.error = "unreadable"
    out.seconds = time.perf_counter() - began
    return out


def _pods(pods: PodResources | None, out: Outcome) -> dict[str, Pod]:
    if pods is None or not pods.present():
        return {}
    try:
        found = pods.allocations()
    except PodResourcesError as exc:
        log.warning("exporter: %s", exc)
        out.pods_up = False
        return {}
    out.pods_up = True
    return found


class Scraper:
    """The IPU part of /metrics, read at most once per ``cache`` seconds."""

    def __init__(self, root: Path, *, cache: float = 1.0, daemon_timeout: float = 2.0, read_timeout: float = 10.0,
                 pods: PodResources | None = None) -> None:
        self.root = root
        self.cache = cache
        self.daemon_timeout = daemon_timeout
        self.read_timeout = read_timeout
        self.pods = pods
        self.last: Outcome | None = None
        self._last_at = -float("inf")
        self._under_way: trio.Event | None = None
        self._busy = threading.Event()  # a worker thread is reading (perhaps stuck)
        self.readings = 0
        self.cached = 0
        self.errors: Counter[str] = Counter()

    async def outcome(self) -> Outcome:
        """The reading this scrape is answered with."""
        while True:
            if self.last is not None and trio.current_time() - self._last_at < self.cache:
                self.cached += 1
                return self.last
            if self._under_way is None:
                break
            await self._under_way.wait()
            if self.last is not None:
                self.cached += 1
                return self.last
        self._under_way = trio.Event()
        try:
            self.last = await self._read()
            self._last_at = trio.current_time()
            self.readings += 1
            if self.last.error is not None:
                self.errors[self.last.error] += 1
            return self.last
        finally:
            self._under_way.set()
            self._under_way = None

    async def _read(self) -> Outcome:
        if self._busy.is_set():
            return Outcome(error="stuck")

        def work() -> Outcome:
            self._busy.set()
            try:
                return read_all(self.root, self.pods, self.daemon_timeout)
            finally:
                self._busy.clear()

        with trio.move_on_after(self.read_timeout):
            return await trio.to_thread.run_sync(work, abandon_on_cancel=True)
        log.warning("exporter: reading the IPUs of %s took over %g s: a stopped daemon?", self.root,
                    self.read_timeout)
        return Outcome(error="stuck")

    def families(self, outcome: Outcome) -> list[Family]:
        """The families of ``outcome`` and of the scraper's own counts."""
        f = metrics.family
        out = [
            f("ipufs_up", [((), float(outcome.up))]),
            f("ipufs_ipus", [((), float(outcome.ipus))]),
            f("ipufs_ipu_unreadable", [((str(i),), 1.0) for i in outcome.unreadable]),
            *metrics.ipu_families(outcome.readings),
            f("ipufs_exporter_scrape_duration_seconds", [((), outcome.seconds)]),
            f("ipufs_exporter_scrapes_total", [((), float(self.readings))]),
            f("ipufs_exporter_scrape_errors_total", [((r,), float(n)) for r, n in sorted(self.errors.items())]),
            f("ipufs_exporter_cached_answers_total", [((), float(self.cached))]),
        ]
        if outcome.pods_up is not None:
            out.append(f("ipufs_exporter_pod_resources_up", [((), float(outcome.pods_up))]))
        return out
