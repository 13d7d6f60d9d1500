# The lock of a --state-dir: one daemon at a time serves the BAR files in a
# state directory. Two would both format the mailbox and both hand the same
# files to clients as different devices. The lock is an flock(2) on
# DIR/lock, which the kernel drops when its holder dies, however it dies,
# so a crashed daemon never leaves the directory locked; the file holds the
# holder's pid, for the message a second daemon gives (docs/reliability.md).
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

NAME = "lock"


class StateDirBusy(RuntimeError):
    """Raised when another live daemon holds the state directory."""


class StateLock:
    """Holds the lock of ``state_dir`` from construction until ``release``."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                who = f"pid {holder}" if holder.isdigit() else "a process that has not yet written its pid"
                raise StateDirBusy(f"state directory {state_dir} is in use by another ipufs daemon ({who})") \
                    from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        """Let another daemon have the directory (closing the file drops
        the lock; the pid in it no longer matters)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
