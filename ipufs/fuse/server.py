# The thin shell that runs a Session over a Transport (ipufs/fuse/
# transport.py): mount, answer requests until unmounted or cancelled,
# unmount. It touches no file descriptor itself: the transport opens,
# reads, writes and closes them (the /dev/fuse one, ipufs/fuse/devfuse.py,
# by default).
#
# Requests are read and answered by one dedicated thread (the reader):
# receive, handle, reply, with no event loop between them, because a trio
# wait_readable cycle per request costs more than the request itself
# (docs/performance.md). How the transport waits for the next request
# (spinning, scanning mapped memory meanwhile) is its own affair. The
# reader holds ``lock`` while it handles a request; whoever else touches
# what the operations own (the daemon's trio tasks) holds it too. Given
# ``quiet``, the reader takes the lock quietly for the requests it accepts
# (the daemon's TileLock: they leave running tiles running). The
# server connects its KernelLink (ipufs/fuse/kernel.py: backing files,
# notifications) to the transport while mounted. A reply that may wait
# (Operations.reply_may_wait) while notifications are still queued is
# written after them, by the KernelLink's thread; so are the replies of
# requests a handler postponed (session.outbox).
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Protocol, cast

import trio

from ipufs import native
from ipufs.fuse import mount as fmount
from ipufs.fuse.devfuse import DevFuse
from ipufs.fuse.kernel import KernelLink
from ipufs.fuse.operations import Negotiated, Operations
from ipufs.fuse.session import Session
from ipufs.fuse.transport import Transport

log = logging.getLogger(__name__)

#: How long a stopping server waits for the reader to see the connection
#: end after unmounting, before it aborts the connection (clients holding
#: files keep a connection alive that someone else unmounted lazily).
LINGER = 0.5


def _nothing() -> None:
    pass


class QuietLock(Protocol):
    """What a server given ``quiet`` needs of its lock besides an RLock's."""

    def acquire_quietly(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take it for a request that leaves what it guards running."""

    def still(self) -> None:
        """The request, taken quietly, needs it in full after all."""


class FuseServer:
    """Serves ``operations`` at ``mountpoint`` over a transport made by
    ``transport`` (a new /dev/fuse connection by default); ``kernel`` is
    connected to it while mounted."""

    def __init__(
        self,
        operations: Operations,
        kernel: KernelLink,
        mountpoint: str,
        *,
        passthrough: bool,
        lock: threading.RLock,
        source: str = "ipufs",
        transport: Callable[[], Transport] = DevFuse.open,
        contended: bytearray | None = None,
        quiet: Callable[[memoryview], bool] | None = None,
    ) -> None:
        self.operations = operations
        self.kernel = kernel
        self.mountpoint = mountpoint
        self.source = source
        self.session = Session(operations, passthrough=passthrough)
        self.lock = lock
        self.open_transport = transport
        self.transport: Transport | None = None  # while running
        #: nonzero while a request waits for ``lock``: tasks that hold it long
        #: give way, and native code reads it (the executor's loop ends its run)
        self.contended = contended if contended is not None else bytearray(1)
        #: the requests that take ``lock`` quietly (a QuietLock); asked under it
        self.quiet = quiet
        if quiet is not None and not (hasattr(lock, "acquire_quietly") and hasattr(lock, "still")):
            raise TypeError("quiet requests need a lock that can be taken quietly")

    @property
    def waiting(self) -> bool:
        """Whether a request waits for the lock."""
        return bool(self.contended[0])

    def connected(self) -> bool:
        """Whether this server's connection is open and alive (not yet
        unmounted or aborted)."""
        transport = self.transport
        return transport is not None and transport.connected()

    def serve(self, transport: Transport, started: Callable[[], None] = lambda: None) -> None:
        """Answer the requests ``transport`` receives, on this thread, until
        the connection ends or the session is destroyed; call ``started``
        once INIT is answered (after ``transport.initialized``). Exceptions of the operations' own are the
        session's concern; anything raised here is a bug of the server's."""
        session, lock, kernel, contended, quiet = self.session, self.lock, self.kernel, self.contended, self.quiet
        take: Callable[..., bool] = lock.acquire
        still: Callable[[], None] = _nothing
        if quiet is not None:
            take, still = cast(QuietLock, lock).acquire_quietly, cast(QuietLock, lock).still
        receive, reply_on = transport.receive, transport.reply
        session.want |= transport.init_flags  # what the transport needs agreed at INIT

        def answer(reply: bytes, tag: int, may_wait: bool | None) -> None:
            # Behind notifications still queued: what the request changed
            # reaches the page cache before the caller sees the reply
            # (unless the kernel holds page locks for it: see
            # Operations.reply_may_wait).
            if kernel.busy and (session.may_wait() if may_wait is None else may_wait):
                kernel.send_after(reply, tag)
            else:
                reply_on(reply, tag)

        buffer = bytearray(session.buffer_size)
        view = memoryview(buffer)
        waiting = True
        while not session.destroyed:
            got = receive(buffer)
            if got is None:
                return
            n, tag = got
            if not take(False):
                contended[0] = 1
                take()
                contended[0] = 0
            try:
                if quiet is not None:
                    try:
                        leaves = quiet(view[:n])
                    except Exception:
                        log.exception("deciding how to take the lock for a request failed")
                        leaves = False  # taken in full: always safe
                    if not leaves:
                        still()
                reply = session.handle(view[:n], tag)
                later = session.outbox
                if later:  # postponed replies released (page-cache mode): rare
                    session.outbox = []
                # Answered before the lock goes: a thread waiting for it
                # (the executor's, between slices) takes the GIL as soon
                # as it may, and the reply would wait for it to let go.
                if reply is not None:
                    answer(reply, tag, None)  # None: ask the session, if it matters
                elif not session.kept:  # takes no reply: what receiving it holds goes back
                    transport.unanswered(view[:n], tag)
            finally:
                lock.release()
            if later:
                for reply, kept, may_wait in later:
                    answer(reply, kept, may_wait)  # type: ignore[arg-type]
            if waiting and session.negotiated is not None:
                waiting = False
                transport.initialized(session.negotiated.flags)
                started()

    def _reader(self, transport: Transport, token: trio.lowlevel.TrioToken, ready: trio.Event,
                done: trio.Event) -> None:
        native.thread_slice(native.SHORTEST_SLICE_S)  # woken, it takes a CPU from the tiles at once
        try:
            self.serve(transport, lambda: token.run_sync_soon(ready.set))
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
        transport = self.open_transport()
        mounted = False
        device: str | None = None
        connection: str | None = None
        reader = None
        where = os.path.realpath(self.mountpoint)  # as mountinfo spells it; before mounting
        try:
            fmount.mount(transport.mount_fd(), where, source=self.source)
            mounted = True
            device = fmount.device_at(where)
            connection = fmount.connection(where)
            transport.mounted()
            self.transport = transport
            ready, done = trio.Event(), trio.Event()
            token = trio.lowlevel.current_trio_token()
            self.kernel.connect(transport)
            reader = threading.Thread(target=self._reader, args=(transport, token, ready, done),
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
                ours = mounted and transport.connected() and fmount.device_at(where) == device
                lazy = ours and fmount.unmount(where)
                if reader is not None:
                    if not lazy:
                        await trio.to_thread.run_sync(reader.join, LINGER)
                    if reader.is_alive() and connection is not None and transport.connected():
                        # Clients still hold files: end the connection, as
                        # closing /dev/fuse would once nobody read it.
                        fmount.abort_connection(connection)
                    await trio.to_thread.run_sync(reader.join, 5)
                await self.kernel.disconnect()
            self.transport = None
            transport.close()


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
