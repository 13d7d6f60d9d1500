# One /dev/fuse file description and the one way anything is written to
# /dev/fuse (``write``): replies and notifications alike, with the errors
# that mean "nobody waits for this any more" (ENOENT, ENODEV) answered
# here, once. Its owner is the /dev/fuse transport (ipufs/fuse/devfuse.py).
from __future__ import annotations

import errno
import fcntl
import os
import select
import struct

from ipufs.fuse import abi

DEVICE = "/dev/fuse"


def write(message: bytes, fd: int) -> bool:
    """Write one reply or notification to /dev/fuse ``fd``. False when the
    kernel no longer wants it: a reply to a request that was withdrawn (its
    caller was interrupted), a notification about a node the kernel holds
    no inode of (both ENOENT), or a connection that has ended (ENODEV).
    Blocking is the caller's concern: a notification may wait on page
    locks. Other failures raise OSError."""
    try:
        os.write(fd, message)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENODEV):
            raise
        return False
    return True


class FuseChannel:
    """One open /dev/fuse file description (blocking unless told)."""

    def __init__(self, fd: int, *, blocking: bool = True) -> None:
        self.fd = fd
        os.set_blocking(fd, blocking)

    @classmethod
    def open(cls, path: str = DEVICE) -> FuseChannel:
        return cls(os.open(path, os.O_RDWR | os.O_CLOEXEC))

    def clone(self) -> FuseChannel:
        """A second, non-blocking file description on the same connection
        (FUSE_DEV_IOC_CLONE). A request read from it must be answered
        through it: each keeps its own list of requests being processed.
        The caller owns and closes it."""
        clone = os.open(DEVICE, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.ioctl(clone, abi.DEV_IOC_CLONE, struct.pack("<I", self.fd))
        except BaseException:
            os.close(clone)
            raise
        return FuseChannel(clone, blocking=False)

    def backing_open(self, fd: int) -> int:
        """Register ``fd`` as a passthrough backing file; returns its id.
        Needs CAP_SYS_ADMIN and a connection that negotiated passthrough."""
        arg = bytearray(abi.BACKING_MAP.pack(fd, 0, 0))
        return int(fcntl.ioctl(self.fd, abi.DEV_IOC_BACKING_OPEN, arg, True))

    def alive(self) -> bool:
        """Whether the connection is open and alive: /dev/fuse polls with
        POLLERR once it is aborted (by an unmount that ended it, by
        fusectl, or by the kernel)."""
        if self.fd < 0:
            return False
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return not any(events & (select.POLLERR | select.POLLHUP | select.POLLNVAL)
                       for _, events in poller.poll(0))

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


class OnDevice:
    """What a /dev/fuse transport does on the description it mounted
    (``device``): notifications, backing files, whether it is alive."""

    device: FuseChannel

    def unanswered(self, message: bytes | memoryview, tag: int) -> None:
        """A read from /dev/fuse holds nothing: a request that takes no
        reply is done once read."""

    def notify(self, message: bytes) -> bool:
        return write(message, self.device.fd)

    def backing_open(self, fd: int) -> int:
        return self.device.backing_open(fd)

    def connected(self) -> bool:
        return self.device.alive()
