# Actions the daemon runs later, in its trio loop and under its lock: the
# end of an ICU timeout, a fault plan's timed faults. They may be asked for
# from any thread (a plan's fault firing on an access, in the FUSE reader)
# and before the loop runs (a plan given at start): those wait for run().
from __future__ import annotations

import math
import threading
from collections.abc import Callable

import trio


class Timers:
    """Schedules actions to run after a delay, holding ``lock``."""

    def __init__(self, *, lock: threading.RLock) -> None:
        self.lock = lock
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._pending: list[tuple[float, Callable[[], None]]] = []

    def later(self, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` in the loop after ``seconds``."""
        if not math.isfinite(seconds) or seconds < 0:  # the edge checks; a NaN timer would end the loop
            raise ValueError(f"not a delay: {seconds!r}")
        nursery, token = self._nursery, self._token
        if nursery is None or token is None:
            self._pending.append((seconds, action))
            return

        async def wait_then() -> None:
            await trio.sleep(seconds)
            with self.lock:
                action()

        # May be called from the FUSE reader: hand the scheduling to the loop.
        token.run_sync_soon(nursery.start_soon, wait_then)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the actions as they fall due, until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._token = trio.lowlevel.current_trio_token()
                pending, self._pending = self._pending, []
                for seconds, action in pending:
                    self.later(seconds, action)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = self._token = None
