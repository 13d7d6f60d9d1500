# Who may change an IPU while a process is attached to it: a mount setting,
# while_attached (docs/filesystem.md, "While a process is attached").
#
# "exclusive" (the default): while process P is attached to an IPU, only P
# and root change it. A process that is neither cannot open the IPU's nodes
# for writing (EBUSY), so it can neither store through a mapping nor write
# its memory; a file opened for writing earlier, by a process that is
# neither P nor root, has its requests that change the IPU refused (EBUSY):
# a pwrite of its registers or mailbox, RESET, an ICU request that changes
# the board. What such a file's mappings store, and what passthrough
# serves in the kernel (reads and writes of ipuN_ex and ipuN_mem), never
# reaches the daemon and cannot be refused. Reads stay open to everyone
# the nodes' permissions let in.
#
# "shared": everyone who may open the nodes for writing changes the IPU,
# attached or not (the rule before this setting).
#
# Like the kernel's own permission checks, a file is judged by who opened
# it: its thread group and whether its opener was root, recorded at open.
from __future__ import annotations

import errno
from collections.abc import Callable

from ipufs.driver.attachments import AttachmentTable
from ipufs.fuse.errors import FUSEError

EXCLUSIVE = "exclusive"
SHARED = "shared"
MODES = (EXCLUSIVE, SHARED)


class WhileAttached:
    """The rule ``mode`` (EXCLUSIVE or SHARED) over ``attachments``;
    ``alive(pidfd)`` says whether an attached process still lives."""

    def __init__(self, mode: str, attachments: AttachmentTable, alive: Callable[[int], bool]) -> None:
        if mode not in MODES:
            raise ValueError(f"while_attached must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.exclusive = mode == EXCLUSIVE
        self.attachments = attachments
        self.alive = alive

    def holder(self, ipu: int, tgid: int | None, by_root: bool) -> int | None:
        """The attached process that keeps a file opened by ``tgid`` (or
        by root) from changing IPU ``ipu``; None when nothing does."""
        if not self.exclusive or by_root:
            return None
        att = self.attachments.get(ipu)
        if att is None or att.pid == tgid or not self.alive(att.pidfd):
            return None
        return att.pid

    def check(self, ipu: int, tgid: int | None, by_root: bool, what: str) -> None:
        """Refuse (EBUSY) what a file of ``tgid`` would change of ``ipu``
        while another process is attached to it."""
        holder = self.holder(ipu, tgid, by_root)
        if holder is not None:
            raise FUSEError(errno.EBUSY, f"IPU {ipu} is attached to process {holder}: while it is, only it and "
                                         f"root may {what} (while_attached = \"exclusive\")")
