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
# that clients store to through mappings (a ``watcher``'s native.Watch),
# and lets the watcher act on what changed; the watcher's own thread sleeps
# meanwhile, for its wake-ups would delay the requests (docs/registers.md).
# The reader holds ``lock`` while it handles a
# request; whoever else touches what the operations own (the daemon's trio
# tasks) holds it too. Notifications that may wait on page locks are
# written from their own thread, so they can never block the reader that
# must answer the READ holding those locks.
from __future__ import annotations

import errno
import logging
import os
import queue
import select
import threading
from typing import Protocol

import trio

from ipufs import native
from ipufs.fuse import mount as fmount
from ipufs.fuse.channel import FuseChannel
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


class Watcher(Protocol):
    """Shared memory the reader scans between tries while it spins."""

    #: Set by the reader while it is awake (native.SpinReader), so that the
    #: watcher's own thread may sleep.
    awake: native.Awake

    def current(self) -> native.Watch | None:
        """What to scan now (None: nothing)."""

    def changed(self, watch: native.Watch, positions: list[int]) -> bool:
        """Act on the ``positions`` of ``watch`` that differ; False when
        some had nothing to do (the reader then stops scanning until its
        next request, so that such a word cannot keep it busy)."""


class FuseServer:
    """Serves ``operations`` at ``mountpoint``."""

    def __init__(
        self,
        operations: Operations,
        mountpoint: str,
        *,
        passthrough: bool = True,
        lock: threading.RLock,
        source: str = "ipufs",
        spin: float = SPIN,
        watcher: Watcher | None = None,
    ) -> None:
        self.operations = operations
        self.mountpoint = mountpoint
        self.source = source
        self.session = Session(operations, passthrough=passthrough)
        self.lock = lock
        self.spin = spin
        self.watcher = watcher
        self.channel: FuseChannel | None = None
        self._notes: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._pending = 0
        self._pending_changed = threading.Condition()

    def connected(self) -> bool:
        """Whether this server's connection is open and alive (not yet
        unmounted or aborted)."""
        return self.channel is not None and _connected(self.channel.fd)

    def backing_open(self, fd: int) -> int:
        """Register ``fd`` as a passthrough backing file of this connection."""
        if self.channel is None:
            raise OSError(errno.EBADF, "not connected")
        return self.channel.backing_open(fd)

    def notify(self, message: bytes) -> None:
        """Queue a notification for the kernel (from any thread)."""
        with self._pending_changed:
            self._pending += 1
        self._notes.put(message)

    def _wait_drained(self) -> None:
        with self._pending_changed:
            self._pending_changed.wait_for(lambda: self._pending == 0, timeout=10)

    async def drain(self) -> None:
        """Wait until every queued notification has reached the kernel."""
        await trio.to_thread.run_sync(self._wait_drained)

    def _notifier(self, channel: FuseChannel) -> None:
        while True:
            message = self._notes.get()
            if message is None:
                return
            try:
                channel.notify(message)
            except OSError as exc:
                log.warning("notification refused by the kernel: %s", exc)
            finally:
                with self._pending_changed:
                    self._pending -= 1
                    self._pending_changed.notify_all()

    def _reader(self, channel: FuseChannel, spinner: int, token: trio.lowlevel.TrioToken, ready: trio.Event,
                done: trio.Event) -> None:
        session, lock, send = self.session, self.lock, channel.send
        buffer = bytearray(session.buffer_size)
        view = memoryview(buffer)
        awake = self.watcher.awake if self.watcher is not None else native.Awake()
        spin = native.SpinReader(spinner, buffer, awake) if spinner >= 0 else None
        started = False
        try:
            while not session.destroyed:
                got = self._read(channel.fd, spin, buffer)
                if got is None:
                    return
                n, fd = got
                with lock:
                    reply = session.handle(view[:n])
                if reply is not None:
                    send(reply, fd)
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

    def _read(self, fd: int, spin: native.SpinReader | None, buffer: bytearray) -> tuple[int, int] | None:
        """One request into ``buffer``: its length and the fd to answer it
        on, or None once the connection has ended. With ``spin`` (reading a
        non-blocking clone of ``fd``), keep trying it for ``self.spin``
        seconds first: a client that asks again at once finds the reader
        awake. Meanwhile, scan what the watcher watches."""
        if spin is not None:
            watcher = self.watcher
            while True:
                watch = watcher.current() if watcher is not None else None
                try:
                    got = spin.read(self.spin, watch)
                except OSError as exc:
                    if _ended(exc):
                        return None
                    continue
                if isinstance(got, list):
                    assert watcher is not None and watch is not None
                    if not watcher.changed(watch, got):
                        watcher = None
                    continue
                if got is not None:
                    return got, spin.fd
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
        channel = self.channel = FuseChannel.open()
        mounted = False
        device: str | None = None
        connection: str | None = None
        reader = notifier = None
        spinner = -1
        where = os.path.realpath(self.mountpoint)  # as mountinfo spells it; before mounting
        try:
            fmount.mount(channel.fd, where, source=self.source)
            mounted = True
            device = fmount.device_at(where)
            connection = fmount.connection(where)
            if self.spin > 0:
                try:
                    spinner = channel.clone()
                except OSError as exc:  # a kernel without FUSE_DEV_IOC_CLONE
                    log.warning("no clone of the FUSE connection (%s): the reader will not spin", exc)
            ready, done = trio.Event(), trio.Event()
            token = trio.lowlevel.current_trio_token()
            notifier = threading.Thread(target=self._notifier, args=(channel,), name="ipufs-notify", daemon=True)
            notifier.start()
            reader = threading.Thread(target=self._reader, args=(channel, spinner, token, ready, done),
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
                self._notes.put(None)
                if notifier is not None:
                    await trio.to_thread.run_sync(notifier.join, 5)
            if spinner >= 0:
                os.close(spinner)
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
