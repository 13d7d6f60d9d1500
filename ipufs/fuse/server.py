# The thin shell that runs a Session over a FuseChannel: mount, answer
# requests until unmounted or cancelled, unmount.
#
# Requests are read and answered by one dedicated thread (the reader):
# read, handle, write, with no event loop between them, because a trio
# wait_readable cycle per request costs more than the request itself
# (docs/performance.md). After answering, the reader keeps trying a
# non-blocking clone of the connection for ``spin`` seconds, then sleeps in
# a blocking read; it wakes with ENODEV when the connection ends (the last
# user of an unmounted filesystem gone, or an abort), and stopping ends the
# connection that way. While it spins, the reader also scans shared memory
# that clients store to through mappings (a ``scanner``'s native.Watch),
# and lets the scanner act on what changed; the register watcher's own
# thread sleeps meanwhile, for its wake-ups would delay the requests
# (docs/registers.md). The reader holds ``lock`` while it handles a
# request; whoever else touches what the operations own (the daemon's trio
# tasks) holds it too. The server connects its KernelLink (ipufs/fuse/
# kernel.py: backing files, notifications) to the channel while mounted.
# A reply that may wait (Operations.reply_may_wait) while notifications
# are still queued is written after them, by the KernelLink's thread; so
# are the replies of requests a handler postponed (session.outbox).
from __future__ import annotations

import errno
import logging
import os
import select
import threading
from typing import Protocol

import trio

from ipufs import native
from ipufs.fuse import mount as fmount
from ipufs.fuse.channel import FuseChannel
from ipufs.fuse.kernel import KernelLink
from ipufs.fuse.operations import Negotiated, Operations
from ipufs.fuse.session import Session

log = logging.getLogger(__name__)

#: How long a stopping server waits for the reader to see the connection
#: end after unmounting, before it aborts the connection (clients holding
#: files keep a connection alive that someone else unmounted lazily).
LINGER = 0.5
#: How long, by default, the reader keeps trying for the next request after
#: answering one before it sleeps in a blocking read (docs/performance.md).
#: A client that asks again within it saves the reader's wake-up; one that
#: does not costs up to this much CPU after its last request.
SPIN = 50e-6


class StoreScanner(Protocol):
    """Shared memory the reader scans between tries while it spins, for
    stores clients made through mappings."""

    #: Set by the reader while it is awake (native.SpinReader), so that the
    #: scanner's own thread may sleep.
    awake: native.Awake

    def current(self) -> native.Watch | None:
        """What to scan now (None: nothing)."""

    def changed(self, watch: native.Watch, positions: list[int]) -> bool:
        """Act on the ``positions`` of ``watch`` that differ; False when
        some had nothing to do (the reader then stops scanning until its
        next request, so that such a word cannot keep it busy)."""


class FuseServer:
    """Serves ``operations`` at ``mountpoint``; ``kernel`` is connected to
    the channel while mounted."""

    def __init__(
        self,
        operations: Operations,
        kernel: KernelLink,
        mountpoint: str,
        *,
        passthrough: bool,
        lock: threading.RLock,
        source: str = "ipufs",
        spin_for: float = SPIN,
        scanner: StoreScanner | None = None,
    ) -> None:
        self.operations = operations
        self.kernel = kernel
        self.mountpoint = mountpoint
        self.source = source
        self.session = Session(operations, passthrough=passthrough)
        self.lock = lock
        self.spin_for = spin_for
        self.scanner = scanner

    def connected(self) -> bool:
        """Whether this server's connection is open and alive (not yet
        unmounted or aborted)."""
        channel = self.kernel.channel
        return channel is not None and _connected(channel.fd)

    def _reader(self, channel: FuseChannel, clone_fd: int, token: trio.lowlevel.TrioToken, ready: trio.Event,
                done: trio.Event) -> None:
        session, lock, send, kernel = self.session, self.lock, channel.send, self.kernel

        def answer(reply: bytes, fd: int, may_wait: bool | None) -> None:
            # Behind notifications still queued: what the request changed
            # reaches the page cache before the caller sees the reply
            # (unless the kernel holds page locks for it: see
            # Operations.reply_may_wait).
            if kernel.busy and (session.may_wait() if may_wait is None else may_wait):
                kernel.send_after(reply, fd)
            else:
                send(reply, fd)

        buffer = bytearray(session.buffer_size)
        view = memoryview(buffer)
        awake = self.scanner.awake if self.scanner is not None else native.Awake()
        spin_reader = native.SpinReader(clone_fd, buffer, awake) if clone_fd >= 0 else None
        started = False
        try:
            while not session.destroyed:
                got = self._read(channel.fd, spin_reader, buffer)
                if got is None:
                    return
                n, fd = got
                with lock:
                    reply = session.handle(view[:n], fd)
                    later, session.outbox = session.outbox, []
                if reply is not None:
                    answer(reply, fd, None)  # None: ask the session, if it matters
                for reply, tag, may_wait in later:
                    answer(reply, tag, may_wait)  # type: ignore[arg-type]
                if not started and session.negotiated is not None:
                    started = True
                    token.run_sync_soon(ready.set)
        except BaseException:
            log.exception("the FUSE reader failed")
        finally:
            awake.clear()
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

    def _read(self, fd: int, spin_reader: native.SpinReader | None, buffer: bytearray) -> tuple[int, int] | None:
        """One request into ``buffer``: its length and the fd to answer it
        on, or None once the connection has ended. With ``spin_reader``
        (reading a non-blocking clone of ``fd``), keep trying it for
        ``self.spin_for`` seconds first: a client that asks again at once
        finds the reader awake. Meanwhile, scan what the scanner watches."""
        if spin_reader is not None:
            scanner = self.scanner
            while True:
                watch = scanner.current() if scanner is not None else None
                try:
                    got = spin_reader.read(self.spin_for, watch)
                except OSError as exc:
                    if _ended(exc):
                        return None
                    continue
                if isinstance(got, list):
                    assert scanner is not None and watch is not None
                    if not scanner.changed(watch, got):
                        scanner = None
                    continue
                if got is not None:
                    return got, spin_reader.fd
                break
        while True:
            try:
                return os.readv(fd, [buffer]), fd
            except OSError as exc:
                if _ended(exc):
                    return None

    async def run(self, *, task_status: trio.TaskStatus[Negotiated] = trio.TASK_STATUS_IGNORED) -> None:
        """Mount, call ``task_status.started(negotiated)`` once INIT is
        answered, serve until unmounted or cancelled, then unmount."""
        channel = FuseChannel.open()
        mounted = False
        device: str | None = None
        connection: str | None = None
        reader = None
        clone_fd = -1
        where = os.path.realpath(self.mountpoint)  # as mountinfo spells it; before mounting
        try:
            fmount.mount(channel.fd, where, source=self.source)
            mounted = True
            device = fmount.device_at(where)
            connection = fmount.connection(where)
            if self.spin_for > 0:
                try:
                    clone_fd = channel.clone()
                except OSError as exc:  # a kernel without FUSE_DEV_IOC_CLONE
                    log.warning("no clone of the FUSE connection (%s): the reader will not spin", exc)
            ready, done = trio.Event(), trio.Event()
            token = trio.lowlevel.current_trio_token()
            self.kernel.connect(channel)
            reader = threading.Thread(target=self._reader, args=(channel, clone_fd, token, ready, done),
                                      name="ipufs-fuse", daemon=True)
            reader.start()
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_when, ready, nursery.cancel_scope)
                    nursery.start_soon(_cancel_when, done, nursery.cancel_scope)
            if not ready.is_set():
                raise RuntimeError("the FUSE connection ended before INIT")
            negotiated = self.session.negotiated
            assert negotiated is not None
            task_status.started(negotiated)
            await done.wait()
        finally:
            with trio.CancelScope(shield=True):
                # Only what is ours: the mount at the mount point may be
                # another daemon's by now (ours detached lazily, or aborted,
                # and a successor mounted there), and it may even have our
                # old device number once our connection is gone. While our
                # connection lives, no other mount has its number.
                ours = mounted and _connected(channel.fd) and fmount.device_at(where) == device
                lazy = ours and fmount.unmount(where)
                if reader is not None:
                    if not lazy:
                        await trio.to_thread.run_sync(reader.join, LINGER)
                    if reader.is_alive() and connection is not None and _connected(channel.fd):
                        # Clients still hold files: end the connection, as
                        # closing /dev/fuse would once nobody read it.
                        fmount.abort_connection(connection)
                    await trio.to_thread.run_sync(reader.join, 5)
                await self.kernel.disconnect()
            if clone_fd >= 0:
                os.close(clone_fd)
            channel.close()


def _connected(fd: int) -> bool:
    """Whether the FUSE connection open on ``fd`` still lives: /dev/fuse
    polls with POLLERR once it is aborted (by an unmount that ended it, by
    fusectl, or by the kernel)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return not any(events & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, events in poller.poll(0))


def _ended(exc: OSError) -> bool:
    """Whether a failed read of /dev/fuse means the connection has ended;
    False for a read to retry (interrupted, or the request was withdrawn).
    Anything else is raised."""
    if exc.errno in (errno.EINTR, errno.ENOENT):
        return False
    if exc.errno in (errno.ENODEV, errno.ECONNABORTED, errno.EBADF):
        return True
    raise exc


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
