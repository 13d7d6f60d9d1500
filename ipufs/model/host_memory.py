# The host's memory as a C600's host exchange packets reach it: the port
# through which the model, which does no I/O, reads and writes it. The
# driver gives the buffers the attached process attached, laid end to end
# in attach order, a packet's host offset a byte offset into them (the
# C600 runtime's layout: osmarks/ipu-stack crates/ipu-codegen/src/host.rs;
# ipufs/driver/dma.py, AttachedBuffers). docs/exchange.md, "Host exchange".
from __future__ import annotations

from typing import Protocol


class HostRangeError(Exception):
    """Raised by a HostMemory for a range no attached buffer covers, or
    one a buffer does not let the device move data through that way."""


class HostMemory(Protocol):
    """The host's memory, by byte offset; both raise HostRangeError."""

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from host offset ``offset`` (host to tile)."""

    def write(self, offset: int, data: bytes) -> None:
        """``data`` to host offset ``offset`` (tile to host)."""


class NoHostMemory:
    """The host's memory of an IPU no driver gave one (a model alone): no buffer covers anything."""

    def read(self, offset: int, length: int) -> bytes:
        raise HostRangeError("no buffers are attached")

    def write(self, offset: int, data: bytes) -> None:
        raise HostRangeError("no buffers are attached")
