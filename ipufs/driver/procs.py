# Facts about client processes, read from /proc: the thread group of the
# thread a FUSE request names (the header carries the calling thread's id),
# and what monitors show about a process.
from __future__ import annotations

import errno


#: errnos that say the daemon lacks a resource, not that a process is gone.
STARVED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def tgid_of(pid: int) -> int | None:
    """The process (thread group) that thread ``pid`` belongs to, or None
    when it is gone. The daemon's own lack of descriptors or memory is
    raised (OSError), never taken for a gone process."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError as exc:
        if exc.errno in STARVED:
            raise
        return None
    except ValueError:
        return None
    return None


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
