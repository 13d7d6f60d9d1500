# The owner of one /dev/fuse file description: a blocking fd (the
# server's reader sleeps in read), replies and notifications written to it,
# passthrough backing files registered on it, the fd number cleared on
# close. OS errors of the device are translated here, once.
from __future__ import annotations

import errno
import fcntl
import os
import struct

from ipufs.fuse import abi

DEVICE = "/dev/fuse"


class FuseChannel:
    """One open /dev/fuse file description."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, True)

    @classmethod
    def open(cls, path: str = DEVICE) -> FuseChannel:
        return cls(os.open(path, os.O_RDWR | os.O_CLOEXEC))

    def send(self, message: bytes, fd: int | None = None) -> None:
        """Write one reply, on ``fd`` when the request was read from a clone.
        A reply to a request the kernel no longer waits for (its caller was
        interrupted and it was withdrawn) fails with ENOENT, which is not an
        error of ours."""
        try:
            os.write(self.fd if fd is None else fd, message)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENODEV):
                raise

    def notify(self, message: bytes) -> bool:
        """Write one notification (blocking semantics are the caller's
        concern: run it in a thread where it may wait on page locks).
        False when the kernel holds no inode of that node (ENOENT) or the
        connection has ended (ENODEV)."""
        try:
            os.write(self.fd, message)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENODEV):
                raise
            return False
        return True

    def clone(self) -> int:
        """A second, non-blocking file description on the same connection
        (FUSE_DEV_IOC_CLONE). A request read from it must be answered
        through it: each keeps its own list of requests being processed.
        The caller owns and closes the fd."""
        clone = os.open(DEVICE, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.ioctl(clone, abi.DEV_IOC_CLONE, struct.pack("<I", self.fd))
        except BaseException:
            os.close(clone)
            raise
        os.set_blocking(clone, False)
        return clone

    def backing_open(self, fd: int) -> int:
        """Register ``fd`` as a passthrough backing file; returns its id.
        Needs CAP_SYS_ADMIN and a connection that negotiated passthrough."""
        arg = bytearray(abi.BACKING_MAP.pack(fd, 0, 0))
        return int(fcntl.ioctl(self.fd, abi.DEV_IOC_BACKING_OPEN, arg, True))

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)
