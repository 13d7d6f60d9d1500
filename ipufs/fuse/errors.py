# The two errors of the FUSE core, after h11: one for a peer that broke the
# protocol, one for an operation that fails with an errno.
from __future__ import annotations

import errno as _errno
import os


class ProtocolError(Exception):
    """Raised by the core when bytes from the kernel are not a well-formed
    request: too short, a length that disagrees with the header, a name
    without its terminating NUL. The request is answered with ``errno`` (when
    it has a unique id) and the session goes on."""

    def __init__(self, message: str, *, errno: int = _errno.EIO, unique: int = 0) -> None:
        super().__init__(message)
        self.errno = errno
        self.unique = unique


class FUSEError(Exception):
    """Raised by an operation handler to fail the request with ``errno``;
    the only way a handler reports failure (the kernel sees ``-errno``)."""

    def __init__(self, errno: int, message: str = "") -> None:
        super().__init__(message or os.strerror(errno))
        self.errno = errno


class Postponed(Exception):
    """Raised by an operation handler whose request must wait for something
    the kernel is yet to send (the answer to a retrieve notification). The
    session keeps the request, sends no reply, and handles it again once
    ``Operations.notify_reply`` names it."""
