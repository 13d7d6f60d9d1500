# The transport seam: how a FuseServer and its KernelLink reach the kernel.
# A transport receives one request at a time into the server's buffer and
# says which tag to answer it on, writes replies on tags and notifications,
# registers passthrough backing files, and owns every file descriptor it
# uses. The server mounts with the transport's /dev/fuse description, runs
# the request loop over it, and closes it; nothing else in fuse/ touches a
# descriptor. There are two: the /dev/fuse reader (ipufs/fuse/devfuse.py)
# and FUSE over io_uring (ipufs/fuse/uring.py), whose native threads, one
# per CPU, hand what they do not answer themselves to ``receive`` in
# order, tagged with the ring entry to answer, and which keeps a /dev/fuse
# description of its own for INIT, forgets, interrupts and notifications.
# Adding one is one module implementing ``Transport``
# (docs/architecture.md, "Adding a transport").
#
# While it waits for requests a transport may scan ``MappedMemory``:
# memory clients store to through mappings of the served files, where a
# store reaches no request. The driver implements it (its register
# watcher); fuse/ only knows that something there may need acting on.
from __future__ import annotations

from typing import Protocol

from ipufs import native


class MappedMemory(Protocol):
    """Memory that clients store to through mappings, scanned by the
    transport between tries while it waits for the next request."""

    #: Set by the transport while it is awake (native.SpinReader), so that
    #: the memory's own watcher thread may sleep meanwhile.
    awake: native.Awake

    def current(self) -> native.Watch | None:
        """What to scan now (None: nothing)."""

    def changed(self, watch: native.Watch, positions: list[int]) -> bool:
        """Act on the ``positions`` of ``watch`` that differ; False when
        some had nothing to do (the transport then stops scanning until its
        next request, so that such a word cannot keep it busy)."""


class Transport(Protocol):
    """One FUSE connection as the server reads and writes it. ``receive``
    is called from one thread (the server's reader); ``reply``, ``notify``
    and ``backing_open`` from any."""

    #: INIT flags the transport needs agreed (abi.InitFlag.OVER_IO_URING):
    #: the session asks the kernel for them besides its own.
    init_flags: int

    def mount_fd(self) -> int:
        """The /dev/fuse descriptor the mount is given (``fd=N``)."""

    def mounted(self) -> None:
        """The connection is mounted: open whatever else serving it needs
        (clones, rings). Falls back quietly, with a logged warning, when the
        kernel lacks a feature; raises only when it cannot serve at all."""

    def initialized(self, flags: int) -> None:
        """INIT is answered, with ``flags`` agreed: start what needs an
        initialized connection (io_uring rings). Called on the receiving
        thread, before it receives again. Falls back as ``mounted`` does."""

    def receive(self, buffer: bytearray) -> tuple[int, int] | None:
        """Wait for one request and read it into ``buffer``: its length
        and the tag to answer it on, or None once the connection has
        ended."""

    def reply(self, message: bytes, tag: int) -> bool:
        """Write the reply to the request received with ``tag``; False when
        the kernel no longer waits for it (withdrawn, or connection ended)."""

    def notify(self, message: bytes) -> bool:
        """Write one notification (it may wait on page locks: never from
        the thread that receives); False when the kernel holds no inode of
        its node or the connection has ended."""

    def backing_open(self, fd: int) -> int:
        """Register ``fd`` as a passthrough backing file; its id. OSError
        when the kernel refuses."""

    def connected(self) -> bool:
        """Whether the connection is open and alive (not yet unmounted or
        aborted)."""

    def close(self) -> None:
        """Close every descriptor the transport holds (idempotent)."""
