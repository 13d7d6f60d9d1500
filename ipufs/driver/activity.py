# Which IPUs clients are using now: how many files of each IPU's config
# space or mailbox are open (the only nodes whose mapped stores reach no
# daemon code and must be watched), and when each last saw a request. The
# filesystem records it (and the native fast path, for the requests it
# answers: ``elsewhere``); the register watcher reads it to decide what to
# watch and how often (docs/registers.md).
from __future__ import annotations

import time
from collections.abc import Callable


class RegisterUse:
    """Open register files and last activity, per IPU."""

    def __init__(self) -> None:
        self.users: dict[int, int] = {}  # ipu -> open config/mailbox files
        self.last: dict[int, float] = {}  # ipu -> monotonic time of its last request
        self.nodes: dict[int, dict[int, int]] = {}  # ipu -> {inode of a node: its open files}
        #: The monotonic time of an IPU's last request served elsewhere
        #: (the native fast path's), -inf for none; None: nowhere else.
        self.elsewhere: Callable[[int], float] | None = None

    def opened(self, ipu: int, ino: int = 0) -> None:
        self.users[ipu] = self.users.get(ipu, 0) + 1
        self.last[ipu] = time.monotonic()
        if ino:
            nodes = self.nodes.setdefault(ipu, {})
            nodes[ino] = nodes.get(ino, 0) + 1

    def closed(self, ipu: int, ino: int = 0) -> None:
        self.users[ipu] -= 1
        nodes = self.nodes.get(ipu)
        if ino and nodes and ino in nodes:
            nodes[ino] -= 1
            if not nodes[ino]:
                del nodes[ino]

    def open_nodes(self, ipu: int) -> list[int]:
        """Inodes of ``ipu``'s config space and mailbox that are open now
        (the kernel holds them, so it can answer a retrieve of them)."""
        return list(self.nodes.get(ipu, ()))

    def touched(self, ipu: int) -> None:
        self.last[ipu] = time.monotonic()

    def watched(self) -> list[int]:
        """IPUs whose config space or mailbox is open: the ones whose
        registers a client may store to through a mapping."""
        return [ipu for ipu, count in self.users.items() if count]

    def busy(self, ipus: tuple[int, ...], within: float) -> bool:
        """Whether any of ``ipus`` saw a request in the last ``within`` s."""
        now = time.monotonic()
        elsewhere = self.elsewhere
        return any(now - self.last.get(index, float("-inf")) < within
                   or (elsewhere is not None and now - elsewhere(index) < within) for index in ipus)
