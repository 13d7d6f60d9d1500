# FUSE over io_uring (ipufs/fuse/transport.py; native/src/uring.c): the
# kernel puts each request on the queue of the CPU its caller runs on, and
# each queue here has a ring served by a native thread pinned to that CPU.
# What a ring thread does not answer itself it hands to ``receive``, in
# order, tagged with its ring entry; ``reply`` commits the answer to that
# entry from any thread, and the ring thread sends it with the fetch of
# the entry's next request (a request that takes no reply, such as a
# retrieve's NOTIFY_REPLY, which comes on the rings too, gets an empty one:
# ``unanswered``). INIT, forgets, interrupts and notifications
# still go through /dev/fuse: ``receive`` waits on both, without the GIL,
# scanning the register watcher's mapped memory while it spins (as the
# /dev/fuse reader does, so that the watcher's thread sleeps meanwhile).
#
# The rings can only be registered once INIT is answered with
# FUSE_OVER_IO_URING agreed (``initialized``); until every queue has one
# the kernel holds new requests back, so none is lost in between. The
# kernel offers the flag only when root has set the fuse module's
# ``enable_uring`` parameter: ``unavailable`` says why it would not be
# used, and nothing here ever changes that parameter. Its row of
# TRANSPORTS (``KIND``) is switched by the `uring` setting (auto, on, off).
from __future__ import annotations

import logging
import os

from ipufs import native
from ipufs.fuse import abi, channel
from ipufs.fuse.channel import FuseChannel, OnDevice
from ipufs.fuse.devfuse import SPIN, ended
from ipufs.fuse.transport import Given, MappedMemory, Switch, Transport, TransportKind

log = logging.getLogger(__name__)

#: The fuse module's switch (root sets it: docs/systemd.md).
ENABLE = "/sys/module/fuse/parameters/enable_uring"
#: io_uring's own switch: 0 all may use it, 1 root (or a group), 2 nobody.
DISABLED = "/proc/sys/kernel/io_uring_disabled"
POSSIBLE_CPUS = "/sys/devices/system/cpu/possible"
#: Entries per ring: requests on one CPU's queue that may be in the daemon
#: at once (more wait in the kernel).
DEPTH = 16


def unavailable() -> str | None:
    """Why FUSE over io_uring cannot be used here, in a few words, or
    None when it can."""
    try:
        with open(ENABLE) as f:
            enabled = f.read().strip()
    except FileNotFoundError:
        return "the kernel lacks FUSE over io_uring (no fuse module parameter enable_uring)"
    except OSError as exc:
        return f"cannot read {ENABLE}: {exc.strerror}"
    if enabled != "Y":
        return f"the fuse module parameter enable_uring is off (root: echo Y > {ENABLE})"
    try:
        with open(DISABLED) as f:
            disabled = int(f.read().strip() or 0)
    except (OSError, ValueError):
        disabled = 0  # a kernel without the switch allows io_uring
    if disabled == 2 or (disabled == 1 and os.geteuid() != 0):
        return f"io_uring is disabled ({DISABLED} = {disabled})"
    return None


def possible_cpus() -> int:
    """How many queues the kernel makes: one per possible CPU."""
    try:
        with open(POSSIBLE_CPUS) as f:
            spans = f.read().strip()
        return max(int(span.rpartition("-")[2]) for span in spans.split(",")) + 1
    except (OSError, ValueError):
        return os.cpu_count() or 1


class Uring(OnDevice):
    """A Transport over FUSE over io_uring: ``device`` is the /dev/fuse
    description mounted (made non-blocking), ``spin_for`` how long
    ``receive`` keeps looking for the next request before it sleeps,
    scanning ``mapped`` meanwhile (as the /dev/fuse reader does: while it
    spins the register watcher's thread sleeps instead of polling on its
    CPU), ``fast`` the native fast path the ring threads answer requests
    on (None: every request comes to ``receive``)."""

    init_flags: int = abi.InitFlag.OVER_IO_URING

    def __init__(self, device: FuseChannel, *, spin_for: float = SPIN, depth: int = DEPTH,
                 fast: native.FastPath | None = None, mapped: MappedMemory | None = None) -> None:
        self.device = device
        self.fast = fast
        self.mapped = mapped
        self._awake = mapped.awake if mapped is not None else native.Awake()
        os.set_blocking(device.fd, False)
        self.spin_ns = int(spin_for * 1e9)
        self.depth = depth
        self.rings: native.Rings | None = None  # made by the first receive, for its buffer
        self.running = False  # the ring threads serve: INIT agreed on io_uring and they registered
        self._buffer: bytearray | None = None

    @classmethod
    def open(cls, *, spin_for: float = SPIN, fast: native.FastPath | None = None,
             mapped: MappedMemory | None = None) -> Uring:
        """A new connection: /dev/fuse opened, not yet mounted."""
        return cls(FuseChannel.open(), spin_for=spin_for, fast=fast, mapped=mapped)

    def mount_fd(self) -> int:
        return self.device.fd

    def mounted(self) -> None:
        pass  # the rings need INIT answered first: initialized()

    def initialized(self, flags: int) -> None:
        if not flags & abi.InitFlag.OVER_IO_URING:
            log.info("the kernel did not offer FUSE over io_uring: serving through /dev/fuse")
            return
        assert self.rings is not None  # INIT was received into its buffer
        self.rings.start(self.spin_ns)  # OSError: the kernel cannot serve this connection at all now
        self.running = True
        log.info("FUSE over io_uring: %d rings of %d entries", possible_cpus(), self.depth)

    def receive(self, buffer: bytearray) -> tuple[int, int] | None:
        rings = self.rings
        if buffer is not self._buffer:
            assert rings is None, "the rings' buffers are sized for the first receive's"
            self._buffer = buffer
            rings = self.rings = native.Rings(self.device.fd, buffer, queues=possible_cpus(), depth=self.depth,
                                              fast=self.fast)
        assert rings is not None
        mapped = self.mapped
        while True:
            watch = mapped.current() if mapped is not None else None
            try:
                got = rings.receive(self.spin_ns, self._awake, watch)
            except OSError as exc:
                if ended(exc):
                    return None
                continue
            if isinstance(got, tuple):
                return got
            assert mapped is not None and watch is not None
            if not mapped.changed(watch, got):
                mapped = None  # nothing to do for what it found: scan no more until the next request

    def reply(self, message: bytes, tag: int) -> bool:
        if tag >= native.Rings.TAG:
            assert self.rings is not None
            return self.rings.reply(message, tag)
        return channel.write(message, tag)

    def unanswered(self, message: bytes | memoryview, tag: int) -> None:
        """The kernel sends NOTIFY_REPLY (a retrieve's answer) on a ring
        entry too, and an entry comes back for the next request only with a
        commit: without one, each retrieve took an entry for good, and once
        a queue's DEPTH were gone requests on that CPU waited forever. So a
        request on an entry that takes no reply gets an empty one."""
        if tag >= native.Rings.TAG and self.rings is not None:
            unique = abi.IN_HEADER.unpack_from(message)[2]
            self.rings.reply(abi.OUT_HEADER.pack(abi.OUT_HEADER.size, 0, unique), tag)

    def close(self) -> None:
        """Stop the ring threads (closing a ring cancels what it waits
        for), then close /dev/fuse."""
        self._awake.clear()
        if self.rings is not None:
            self.rings.close()
        self.device.close()


def _build(given: Given) -> Uring:
    return Uring.open(spin_for=given.spin_for, fast=given.fast, mapped=given.mapped)


def _in_force(transport: Transport | None) -> bool:
    return isinstance(transport, Uring) and transport.running


#: Its row of TRANSPORTS (ipufs/fuse/transports.py).
KIND = TransportKind(
    "FUSE over io_uring", _build,
    Switch("uring", "serve requests over FUSE over io_uring, a ring and a thread per CPU: auto (the default: "
           "where the kernel offers it, its fuse module's enable_uring set by root), on (fail where it cannot) "
           "or off (docs/systemd.md)"),
    unavailable, offered="the kernel offers it and enable_uring is Y", in_force=_in_force)
