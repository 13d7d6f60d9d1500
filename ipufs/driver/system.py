# The system calls the driver makes on client processes, gathered in one
# record so that tests can drive the driver without root and without real
# processes: queueing a signal with a value through a pidfd, opening and
# probing pidfds, reading and writing a process's memory
# (process_vm_readv/writev), and the /proc facts of ipufs/driver/procs.py.
from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from ipufs import native
from ipufs.driver import pid_namespaces, procs


def pidfd_alive(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` has not been reaped (so its pid
    cannot have been given to another process). Signal 0 only checks."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists; we may not signal it
    return True


@dataclass(frozen=True, slots=True)
class SystemCalls:
    """What the driver asks of the kernel about client processes. Each
    raises OSError as the real call would."""

    #: Queue signal ``signo`` with ``si_int`` = value to a pidfd's process.
    send_signal: Callable[[int, int, int], None] = native.pidfd_send_value
    #: pidfd_open(2) of a process (thread group) id.
    pidfd_open: Callable[[int], int] = os.pidfd_open
    #: Whether a pidfd's process is still there.
    alive: Callable[[int], bool] = pidfd_alive
    #: process_vm_readv(2): (pid, address, length) -> bytes.
    vm_read: Callable[[int, int, int], bytes] = native.vm_read
    #: process_vm_writev(2): (pid, address, data) -> bytes written.
    vm_write: Callable[[int, int, bytes], int] = native.vm_write
    #: The thread group of a thread, None when it is gone.
    tgid_of: Callable[[int], int | None] = procs.tgid_of
    #: A process's command name, for traces.
    command_of: Callable[[int], str] = procs.command_of
    #: A process's real uid, -1 when it cannot be read (status reports).
    uid_of: Callable[[int], int] = procs.uid_of
    #: Where a process lives: its PID namespace's inode and its pid there.
    pid_namespace: Callable[[int], tuple[int, int] | None] = procs.pid_namespace
    #: (pid, asker): the pid as process asker numbers it, None when it cannot see it.
    pid_seen_by: Callable[[int, int], int | None] = pid_namespaces.seen_by


#: The real system calls.
REAL = SystemCalls()
