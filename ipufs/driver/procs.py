# Facts about client processes, read from /proc: the thread group of the
# thread a FUSE request names (the header carries the calling thread's id),
# and what monitors show about a process (proc(5): /proc/PID/status, comm).
from __future__ import annotations

import errno
import os

#: errnos that say the daemon lacks a resource, not that a process is gone.
STARVED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def status_field(pid: int, name: str) -> str | None:
    """The first value of field ``name`` ("Tgid", "Uid", ...) of
    /proc/PID/status, or None when the process is gone. The daemon's own
    lack of descriptors or memory is raised (OSError), never taken for a
    gone process."""
    prefix = name + ":"
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(prefix):
                    fields = line.split()
                    return fields[1] if len(fields) > 1 else None
    except OSError as exc:
        if exc.errno in STARVED:
            raise
        return None
    return None


def tgid_of(pid: int) -> int | None:
    """The process (thread group) that thread ``pid`` belongs to, or None
    when it is gone (raises OSError as status_field does)."""
    value = status_field(pid, "Tgid")
    return int(value) if value is not None and value.isdigit() else None


def uid_of(pid: int) -> int:
    """The real uid of process ``pid``, or -1 when it is gone or cannot be
    read (for status reports, which must not fail)."""
    try:
        value = status_field(pid, "Uid")
    except OSError:
        return -1
    return int(value) if value is not None and value.isdigit() else -1


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def pid_namespace(pid: int) -> tuple[int, int] | None:
    """Where process ``pid`` lives: the inode of its PID namespace and its
    pid there (the last of /proc/PID/status's NSpid), or None when that
    cannot be read. A tool in the same namespace (a command of `ipufs
    run`, which has a PID namespace of its own) shows that pid."""
    try:
        namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return namespace, int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None
