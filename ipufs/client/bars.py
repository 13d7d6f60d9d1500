# How long a node is, so a client can map it whole. Where the compatibility
# library shows the nodes as character devices (`ipufs run`, containers:
# docs/compat.md), stat gives them size 0, as a real character device has;
# lseek to the end asks the file itself, which the library leaves alone.
from __future__ import annotations

import os


def bar_size(fd: int) -> int:
    """The size of the BAR open as ``fd`` (its file offset is left at 0)."""
    size = os.lseek(fd, 0, os.SEEK_END)
    os.lseek(fd, 0, os.SEEK_SET)
    return size
