# Watching attached processes from trio: a pidfd becomes readable when its
# process exits, so one small task per attachment waits on it and detaches.
from __future__ import annotations

from collections.abc import Callable

import trio


class PidfdWatcher:
    """Calls ``on_exit`` in the trio loop when the process behind a pidfd
    exits. ``unwatch`` must be called before the pidfd is closed."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.scopes: dict[int, trio.CancelScope] = {}

    def watch(self, pidfd: int, on_exit: Callable[[], None]) -> None:
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
                on_exit()

    def unwatch(self, pidfd: int) -> None:
        scope = self.scopes.pop(pidfd, None)
        if scope is not None:
            scope.cancel()
            trio.lowlevel.notify_closing(pidfd)
