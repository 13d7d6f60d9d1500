# How many file descriptors a daemon of N IPUs needs, and the soft limit
# raised to meet it. Each IPU holds its four regions' backing memory for
# as long as the daemon runs, twice (the memfd or state file, and the
# descriptor Python's mmap keeps of it), and a pidfd while a process is
# attached; the daemon itself holds /dev/fuse, its control socket and up to
# MAX_CONNECTIONS connections, trio's wake-up descriptors, the trace file
# and its state-directory lock, plus what a built-in exporter holds (its
# capped connections: ipufs/monitoring/exporter.py). The usual soft limit (1024) is below what
# 128 IPUs need, and the hard limit (often 524288) far above: the daemon
# raises its soft limit to the hard one, and where even that is too low,
# refuses in one line naming the need (docs/systemd.md).
from __future__ import annotations

import resource

from ipufs.daemon.control.server import MAX_CONNECTIONS
from ipufs.model.profile import Region

#: Per IPU: each region's backing file and mmap's copy of it, and the
#: pidfd of the attached process.
PER_IPU = 2 * len(Region) + 1
#: Whatever the number of IPUs: /dev/fuse (and its clone), standard
#: streams, trio's epoll and wake-up pipe, the control socket and its
#: connections, the trace file, the state lock, and room for the
#: descriptors a request holds for a moment (accept, pidfd_open, /proc).
BASE = 64 + MAX_CONNECTIONS


class TooFewDescriptors(RuntimeError):
    """Even the hard limit on open files is below what the IPUs need."""


def needed(ipus: int, extra: int = 0) -> int:
    """The descriptors a daemon of ``ipus`` IPUs needs at most, with
    ``extra`` for what else it serves (a built-in exporter)."""
    return BASE + PER_IPU * ipus + extra


def ensure(ipus: int, extra: int = 0) -> int:
    """Raise the soft limit on open files to the hard limit if it is below
    what ``ipus`` IPUs (and ``extra``) need; the soft limit in force.
    Raises TooFewDescriptors when the hard limit is too low."""
    need = needed(ipus, extra)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return soft
    if hard != resource.RLIM_INFINITY and hard < need:
        raise TooFewDescriptors(f"{ipus} IPUs need {need} file descriptors ({BASE} + {PER_IPU} per IPU"
                                f"{f' + {extra} for the exporter' if extra else ''}), but "
                                f"the limit on open files is {hard}: raise it (`ulimit -n {need}` as root, or "
                                f"LimitNOFILE={need} in the systemd unit)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard
