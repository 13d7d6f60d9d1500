# The /dev/fuse transport (ipufs/fuse/transport.py): a blocking file
# description the mount is given, and a non-blocking clone of it opened
# once mounted. After answering a request the server asks for the next;
# this keeps trying the clone for ``spin_for`` seconds (native.SpinReader,
# without the GIL), so a client that asks again at once finds the reader
# awake, then sleeps in a blocking read of the first description. That
# read ends with ENODEV when the connection does (the last user of an
# unmounted filesystem gone, or an abort). While it spins it also scans
# the ``MappedMemory`` it was given and hands what changed over; its
# owner's thread sleeps meanwhile, for its wake-ups would delay requests
# (docs/registers.md). A request read from the clone is answered on the
# clone: the tag is the descriptor it came from. Given a fast path (an
# opaque native.FastPath: what it answers, ipufs/driver/fast_path.py
# decides), the native reads answer the requests it takes themselves, the
# spin and the blocking read alike, and only the others come back here.
# Its row of TRANSPORTS (``KIND``) has no switch: a mount serves over it
# wherever no other transport is chosen.
from __future__ import annotations

import errno
import logging
import os

from ipufs import native
from ipufs.fuse import channel
from ipufs.fuse.channel import FuseChannel, OnDevice
from ipufs.fuse.transport import Given, MappedMemory, TransportKind

log = logging.getLogger(__name__)

#: How long, by default, the reader keeps trying for the next request after
#: answering one before it sleeps in a blocking read (docs/performance.md).
#: A client that asks again within it saves the reader's wake-up; one that
#: does not costs up to this much CPU after its last request.
SPIN = 50e-6


class DevFuse(OnDevice):
    """A Transport over /dev/fuse: ``device`` is the description mounted,
    ``spin_for`` how long to try a clone before sleeping (0: never clone),
    ``mapped`` what to scan meanwhile, ``fast`` the native fast path the
    reads answer requests on (None: every request comes back)."""

    init_flags = 0

    def __init__(self, device: FuseChannel, *, spin_for: float = SPIN, mapped: MappedMemory | None = None,
                 clone: FuseChannel | None = None, fast: native.FastPath | None = None) -> None:
        self.device = device
        self.spin_for = spin_for
        self.mapped = mapped
        self.fast = fast
        self.clone = clone  # opened by mounted(), or given (tests over pipes)
        self._awake = mapped.awake if mapped is not None else native.Awake()
        self._spin: native.SpinReader | None = None
        self._buffer: bytearray | None = None

    @classmethod
    def open(cls, *, spin_for: float = SPIN, mapped: MappedMemory | None = None,
             fast: native.FastPath | None = None) -> DevFuse:
        """A new connection: /dev/fuse opened, not yet mounted."""
        return cls(FuseChannel.open(), spin_for=spin_for, mapped=mapped, fast=fast)

    def mount_fd(self) -> int:
        return self.device.fd

    def mounted(self) -> None:
        if self.spin_for > 0 and self.clone is None:
            try:
                self.clone = self.device.clone()
            except OSError as exc:  # a kernel without FUSE_DEV_IOC_CLONE
                log.warning("no clone of the FUSE connection (%s): the reader will not spin", exc)

    def initialized(self, flags: int) -> None:
        pass

    def receive(self, buffer: bytearray) -> tuple[int, int] | None:
        if buffer is not self._buffer:
            self._buffer = buffer
            self._spin = native.SpinReader(self.clone.fd if self.clone is not None else -1, buffer, self._awake,
                                           self.fast)
        spin = self._spin
        assert spin is not None
        while True:
            if self.clone is not None:
                got = self._spin_read(spin)
                if got is not None:
                    return got if got[0] >= 0 else None
            fd = self.device.fd
            try:
                n = spin.sleep(fd) if self.fast is not None else os.readv(fd, [buffer])
            except OSError as exc:
                if ended(exc):
                    return None
                continue
            if n is not None:
                return n, fd
            # The fast path answered what woke the reader: spin again.

    def _spin_read(self, spin: native.SpinReader) -> tuple[int, int] | None:
        """Spin for the next request: (its length, the tag), (-1, tag) when
        the connection ended, or None when the time ran out."""
        mapped = self.mapped
        while True:
            watch = mapped.current() if mapped is not None else None
            try:
                n = spin.read(self.spin_for, watch)
            except OSError as exc:
                if ended(exc):
                    return -1, spin.fd
                continue
            if n is not None:
                return n, spin.fd
            if not spin.found:
                return None  # the time ran out: sleep
            assert mapped is not None and watch is not None
            if not mapped.changed(watch, spin.found):
                mapped = None

    #: Replies go out on the descriptor the request came from (its tag).
    reply = staticmethod(channel.write)

    def close(self) -> None:
        self._awake.clear()
        self._spin = self._buffer = None
        if self.clone is not None:
            self.clone.close()
        self.device.close()


def _build(given: Given) -> DevFuse:
    return DevFuse.open(spin_for=given.spin_for, mapped=given.mapped, fast=given.fast)


#: Its row of TRANSPORTS (ipufs/fuse/transports.py).
KIND = TransportKind("/dev/fuse", _build)


def ended(exc: OSError) -> bool:
    """Whether a failed read of /dev/fuse means the connection has ended;
    False for a read to retry (interrupted, or the request was withdrawn).
    Anything else is raised."""
    if exc.errno in (errno.EINTR, errno.ENOENT):
        return False
    if exc.errno in (errno.ENODEV, errno.ECONNABORTED, errno.EBADF):
        return True
    raise exc
