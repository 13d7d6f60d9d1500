# A pid as another process sees it. The daemon knows its clients by their
# pids in its own PID namespace (the FUSE header's, SO_PEERCRED's); a tool
# in a PID namespace of its own (a command of `ipufs run`, a container)
# knows them by other numbers, or not at all. As the kernel does for
# SO_PEERCRED and /proc, a pid is told to a process as its namespace
# numbers it: the target's NSpid line (proc(5): its pid in each namespace
# from the one /proc belongs to down to its own) read at the depth of the
# asker's namespace, once the target's namespace at that depth is shown,
# by NS_GET_PARENT (ioctl_ns(2)), to be the asker's; None when it is not
# (the asker cannot see the target).
from __future__ import annotations

import fcntl
import os
from collections.abc import Callable

#: ioctl_ns(2): _IO(0xb7, 0x2), a descriptor of the parent PID namespace.
NS_GET_PARENT = 0xB702


def _nspids(pid: int) -> list[int] | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(p) for p in line.split()[1:]]
    except (OSError, ValueError):
        return None
    return None


def _namespace(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def seen_by(pid: int, asker: int) -> int | None:
    """Process ``pid`` as process ``asker`` numbers it (both as this
    process's /proc numbers them; ``asker`` 0: one outside this namespace,
    which SO_PEERCRED reports so); None when the asker cannot see it or,
    unless they share this namespace, either is gone."""
    if asker <= 0:
        return None
    try:
        mine = _namespace(f"/proc/{asker}/ns/pid")
        if mine == _namespace("/proc/self/ns/pid"):
            return pid
        asker_ids, target_ids = _nspids(asker), _nspids(pid)
        if asker_ids is None or target_ids is None:
            return None
        depth = len(asker_ids) - 1
        if len(target_ids) <= depth:
            return None  # the target lives above the asker's namespace
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        try:
            for _ in range(len(target_ids) - 1 - depth):
                parent = fcntl.ioctl(fd, NS_GET_PARENT)
                os.close(fd)
                fd = parent
            st = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError:
        return None
    return target_ids[depth] if (st.st_dev, st.st_ino) == mine else None


class PidView:
    """Pids as process ``asker`` sees them (``seen_by``), remembered: a
    trace names the same few processes again and again. ``same`` says the
    asker shares this namespace, so every pid reads as it is."""

    _REMEMBERED = 4096

    def __init__(self, asker: int, seen: Callable[[int, int], int | None] = seen_by) -> None:
        self.asker = asker
        self.seen = seen
        self.same = asker > 0 and _shares_mine(asker)
        self._known: dict[int, int | None] = {}

    def __call__(self, pid: int) -> int | None:
        if self.same:
            return pid
        known = self._known
        if pid not in known:
            if len(known) >= self._REMEMBERED:
                known.clear()
            known[pid] = self.seen(pid, self.asker)
        return known[pid]


def _shares_mine(asker: int) -> bool:
    try:
        return _namespace(f"/proc/{asker}/ns/pid") == _namespace("/proc/self/ns/pid")
    except OSError:
        return False
