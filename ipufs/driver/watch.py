# Watching attached processes from trio: a pidfd becomes readable when its
# process exits, so one small task per attachment waits on it and detaches.
# watch() and unwatch() may be called from any thread (the FUSE reader
# attaches and detaches); the work is handed to the trio loop in order.
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Protocol

import trio


class ExitWatcher(Protocol):
    """What the driver needs to learn that an attached process exited."""

    def watch(self, pidfd: int, on_exit: Callable[[], None]) -> None:
        """Call ``on_exit`` (holding the daemon's lock) once the process
        behind ``pidfd`` exits."""

    def unwatch(self, pidfd: int) -> None:
        """Stop watching ``pidfd`` and close it (taking it over)."""


class PidfdWatcher:
    """Calls ``on_exit`` in the trio loop, holding ``lock``, when the
    process behind a pidfd exits. ``unwatch`` takes the pidfd over and
    closes it once the loop has stopped waiting on it. Watches need
    ``run()`` to be running; once it has ended, ``unwatch`` closes at once."""

    def __init__(self, *, lock: threading.RLock) -> None:
        self.lock = lock
        self.scopes: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve watches until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._token = trio.lowlevel.current_trio_token()
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = self._token = None

    def watch(self, pidfd: int, on_exit: Callable[[], None]) -> None:
        token = self._token
        if token is None:
            return  # stopping: the daemon detaches everyone itself
        try:
            token.run_sync_soon(self._start, pidfd, on_exit)
        except trio.RunFinishedError:
            pass

    def _start(self, pidfd: int, on_exit: Callable[[], None]) -> None:
        scope = trio.CancelScope()
        self.scopes[pidfd] = scope
        if self._nursery is None:  # stopped meanwhile: unwatch closes it
            scope.cancel()
            return
        self._nursery.start_soon(self._wait, pidfd, on_exit, scope)

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
        token = self._token
        try:
            if token is None:
                raise trio.RunFinishedError
            token.run_sync_soon(self._stop, pidfd)
        except trio.RunFinishedError:
            self.scopes.pop(pidfd, None)
            os.close(pidfd)

    def _stop(self, pidfd: int) -> None:
        scope = self.scopes.pop(pidfd, None)
        if scope is not None:
            scope.cancel()
        trio.lowlevel.notify_closing(pidfd)
        os.close(pidfd)
