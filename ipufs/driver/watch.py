# Watching attached processes from trio: a pidfd becomes readable when its
# process exits, so one small task per attachment waits on it and detaches.
# watch() and unwatch() may be called from any thread (the FUSE reader
# attaches and detaches); the work is handed to the trio loop in order.
from __future__ import annotations

import os
import threading
from collections.abc import Callable

import trio


class PidfdWatcher:
    """Calls ``on_exit`` in the trio loop, holding ``lock``, when the
    process behind a pidfd exits. ``unwatch`` takes the pidfd over and
    closes it once the loop has stopped waiting on it."""

    def __init__(self, nursery: trio.Nursery, *, lock: threading.RLock) -> None:
        self.nursery = nursery
        self.lock = lock
        self.token = trio.lowlevel.current_trio_token()
        self.scopes: dict[int, trio.CancelScope] = {}

    def watch(self, pidfd: int, on_exit: Callable[[], None]) -> None:
        self.token.run_sync_soon(self._start, pidfd, on_exit)

    def _start(self, pidfd: int, on_exit: Callable[[], None]) -> None:
        scope = trio.CancelScope()
        self.scopes[pidfd] = scope
        self.nursery.start_soon(self._wait, pidfd, on_exit, scope)

    async def _wait(self, pidfd: int, on_exit: Callable[[], None], scope: trio.CancelScope) -> None:
        if scope.cancel_called:
            return  # unwatched before this task first ran: the pidfd is closed
        with scope:
            try:
                await trio.lowlevel.wait_readable(pidfd)
            except trio.ClosedResourceError:
                return
            if self.scopes.get(pidfd) is scope:
                del self.scopes[pidfd]
                with self.lock:
                    on_exit()

    def unwatch(self, pidfd: int) -> None:
        try:
            self.token.run_sync_soon(self._stop, pidfd)
        except trio.RunFinishedError:
            os.close(pidfd)

    def _stop(self, pidfd: int) -> None:
        scope = self.scopes.pop(pidfd, None)
        if scope is not None:
            scope.cancel()
        trio.lowlevel.notify_closing(pidfd)
        os.close(pidfd)
