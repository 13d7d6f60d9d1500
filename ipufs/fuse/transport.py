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
# A mount may serve over each transport that has a row, a TransportKind,
# in TRANSPORTS (ipufs/fuse/transports.py): its name, the setting that
# selects it, how it is built from what every mount gives (``Given``),
# whether it runs the native fast path and whether it is in force once
# built. Adding one is one module implementing ``Transport`` and its row
# (docs/architecture.md, "Adding a transport").
#
# While it waits for requests a transport may scan ``MappedMemory``:
# memory clients store to through mappings of the served files, where a
# store reaches no request. The driver implements it (its register
# watcher); fuse/ only knows that something there may need acting on.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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

    def unanswered(self, message: bytes | memoryview, tag: int) -> None:
        """The request ``message``, received with ``tag``, takes no reply
        (NOTIFY_REPLY, FORGET, INTERRUPT): give back whatever receiving it
        holds (an io_uring entry returns to the kernel only with a commit)."""

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


@dataclass(frozen=True, slots=True)
class Given:
    """What a mount gives every transport it builds."""

    #: How long, after answering a request, to keep looking for the next
    #: one before sleeping (``--spin-us``).
    spin_for: float
    #: The native fast path to answer requests with (an opaque
    #: native.FastPath; None: every request goes to ``receive``).
    fast: native.FastPath | None
    #: What to scan while spinning (the driver's register watcher).
    mapped: MappedMemory | None


@dataclass(frozen=True, slots=True)
class Switch:
    """The mount setting that selects a transport: ``key`` = auto (serve
    over it where it can), on (fail where it cannot) or off; ``default``
    when not given. ``help`` is its one line of --help and of the shipped
    settings file."""

    key: str
    help: str
    default: str = "auto"

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


def _always(transport: Transport | None) -> bool:
    return True


def _nowhere() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class TransportKind:
    """A transport a mount may serve over: one row of TRANSPORTS."""

    #: How the start line, the root's user.ipufs.transport and the control
    #: socket name it ("/dev/fuse", "FUSE over io_uring").
    name: str
    #: A new connection, not yet mounted.
    build: Callable[[Given], Transport]
    #: The setting that selects it; None for the last row, which serves
    #: wherever no other is chosen.
    switch: Switch | None = None
    #: Why it cannot serve here, in a few words; None when it can.
    unavailable: Callable[[], str | None] = _nowhere
    #: Why it serves where it can (the start line's reason, after the switch).
    offered: str = ""
    #: Whether the native fast path answers requests inside it (Given.fast).
    fast_path: bool = True
    #: Whether a transport it built serves as itself (False: it fell back
    #: to /dev/fuse, the kernel not agreeing at INIT); None: not running.
    in_force: Callable[[Transport | None], bool] = _always
