# The thin shell that runs a Session over a FuseChannel: mount, answer
# requests until unmounted or cancelled, unmount.
#
# Requests are read and answered by one dedicated thread (the reader):
# poll, read, handle, write, with no event loop between them, because a
# trio wait_readable cycle per request costs more than the request itself
# (docs/performance.md). The reader holds ``lock`` while it handles a
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

import trio

from ipufs.fuse import mount as fmount
from ipufs.fuse.channel import FuseChannel
from ipufs.fuse.operations import Negotiated, Operations
from ipufs.fuse.session import Session

log = logging.getLogger(__name__)

POLL_MS = 100  # how often an idle reader looks at its stop flag


class FuseServer:
    """Serves ``operations`` at ``mountpoint``."""

    def __init__(
        self,
        operations: Operations,
        mountpoint: str,
        *,
        passthrough: bool = True,
        source: str = "ipufs",
        lock: threading.RLock | None = None,
    ) -> None:
        self.operations = operations
        self.mountpoint = mountpoint
        self.source = source
        self.session = Session(operations, passthrough=passthrough)
        self.lock = lock or threading.RLock()
        self.channel: FuseChannel | None = None
        self._notes: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._pending = 0
        self._pending_changed = threading.Condition()
        self._stop = threading.Event()

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

    def _reader(self, channel: FuseChannel, token: trio.lowlevel.TrioToken, ready: trio.Event,
                done: trio.Event) -> None:
        session, lock = self.session, self.lock
        buffer = bytearray(session.buffer_size)
        poller = select.poll()
        poller.register(channel.fd, select.POLLIN)
        started = False
        try:
            while not self._stop.is_set() and not session.destroyed:
                try:
                    # Read first: under load the next request is already
                    # queued, and one system call fetches it.
                    n = os.readv(channel.fd, [buffer])
                except BlockingIOError:
                    poller.poll(POLL_MS)
                    continue
                except OSError as exc:
                    if exc.errno in (errno.EINTR, errno.ENOENT):
                        continue  # interrupted, or the request was withdrawn
                    if exc.errno in (errno.ENODEV, errno.ECONNABORTED, errno.EBADF):
                        return  # unmounted or aborted
                    raise
                with lock:
                    reply = session.handle(memoryview(buffer)[:n])
                if reply is not None:
                    channel.send(reply)
                if not started and session.negotiated is not None:
                    started = True
                    token.run_sync_soon(ready.set)
        except BaseException:
            log.exception("the FUSE reader failed")
        finally:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

    async def run(self, *, task_status: trio.TaskStatus[Negotiated] = trio.TASK_STATUS_IGNORED) -> None:
        """Mount, call ``task_status.started(negotiated)`` once INIT is
        answered, serve until unmounted or cancelled, then unmount."""
        channel = self.channel = FuseChannel.open()
        mounted = False
        reader = notifier = None
        self._stop.clear()
        try:
            fmount.mount(channel.fd, self.mountpoint, source=self.source)
            mounted = True
            ready, done = trio.Event(), trio.Event()
            token = trio.lowlevel.current_trio_token()
            notifier = threading.Thread(target=self._notifier, args=(channel,), name="ipufs-notify", daemon=True)
            notifier.start()
            reader = threading.Thread(target=self._reader, args=(channel, token, ready, done),
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
            self._stop.set()
            with trio.CancelScope(shield=True):
                if mounted:
                    fmount.unmount(self.mountpoint)
                if reader is not None:
                    await trio.to_thread.run_sync(reader.join, 2 * POLL_MS / 1000 + 1)
                self._notes.put(None)
                if notifier is not None:
                    await trio.to_thread.run_sync(notifier.join, 5)
            channel.close()


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
