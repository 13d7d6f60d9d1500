# How long a tool waits for a daemon. A FUSE request to a stopped or stuck
# daemon waits in the kernel until the daemon answers, the connection is
# aborted, or the caller gets a fatal signal (docs/reliability.md, "A
# stopped daemon"); no signal handler of ours would run meanwhile. So the
# tools that read the nodes or talk to the control socket (ls, info,
# monitor, reset, inject, trace) run under a watchdog thread: when the work
# has not finished in time it says so in one line and ends the process,
# which also ends the wait of the thread stuck in the kernel.
from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ipufs.problems import FAILED

#: Seconds a tool waits for the daemon's answers (--timeout).
DAEMON_TIMEOUT = 10.0


def message(command: str, mountpoint: str, seconds: float) -> str:
    """What a tool says when the daemon of ``mountpoint`` did not answer."""
    return (f"ipufs {command}: the ipufs daemon of {mountpoint} did not answer within {seconds:g} s: it is "
            f"stopped (SIGSTOP, a debugger) or stuck; resume it (kill -CONT), or end the wait of every "
            f"caller with `ipufs umount --abort {mountpoint}` (docs/reliability.md)")


def _fuse_mounts() -> list[str]:
    """The mount points of FUSE filesystems, from the mount table alone."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.startswith("fuse"):
                points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), left.split()[4]))
    return sorted(points, key=len, reverse=True)


def mountpoint_of(root: Path) -> str:
    """The mount the nodes in ``root`` belong to, found without asking any
    daemon: ``root`` itself or the FUSE mount it lies in, else the one its
    ipu0 links into (a link in /dev is read outside the mount); ``root``
    when none is found."""
    points = _fuse_mounts()

    def under(path: str) -> str | None:
        return next((m for m in points if path == m or path.startswith(m.rstrip("/") + "/")), None)

    path = os.path.abspath(root)
    found = under(path)
    if found is None:
        try:
            found = under(os.path.join(path, os.readlink(os.path.join(path, "ipu0"))))
        except OSError:
            pass
    return found or path


@contextmanager
def answered_within(command: str, seconds: float, root: Path) -> Iterator[None]:
    """Run the body, or, once ``seconds`` have passed, end this process with
    status FAILED and message() naming the mount of ``root`` on stderr."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        try:
            where = mountpoint_of(root)
        except OSError:
            where = str(root)
        os.write(2, (message(command, where, seconds) + "\n").encode())
        os._exit(FAILED)

    threading.Thread(target=watch, name="ipufs-deadline", daemon=True).start()
    try:
        yield
    finally:
        done.set()
