# The thin trio shell that runs a Session over a FuseChannel: mount, answer
# requests until unmounted or cancelled, unmount. Notifications that may
# wait on page locks are written from a worker thread so that they can
# never block the loop that must answer the READ holding those locks.
from __future__ import annotations

import logging
import math

import trio

from ipufs.fuse import mount as fmount
from ipufs.fuse.channel import ChannelClosed, FuseChannel
from ipufs.fuse.operations import Negotiated, Operations
from ipufs.fuse.session import Session

log = logging.getLogger(__name__)


class FuseServer:
    """Serves ``operations`` at ``mountpoint``."""

    def __init__(
        self,
        operations: Operations,
        mountpoint: str,
        *,
        passthrough: bool = True,
        source: str = "ipufs",
    ) -> None:
        self.operations = operations
        self.mountpoint = mountpoint
        self.source = source
        self.session = Session(operations, passthrough=passthrough)
        self.channel: FuseChannel | None = None
        self._notify_send: trio.MemorySendChannel[bytes] | None = None
        self._pending = 0
        self._drained = trio.Event()

    def backing_open(self, fd: int) -> int:
        """Register ``fd`` as a passthrough backing file of this connection."""
        if self.channel is None:
            raise OSError(9, "not connected")
        return self.channel.backing_open(fd)

    def notify(self, message: bytes) -> None:
        """Queue a notification for the kernel (from within the trio loop)."""
        if self._notify_send is not None:
            try:
                self._notify_send.send_nowait(message)
                self._pending += 1
            except (trio.WouldBlock, trio.ClosedResourceError):
                log.warning("notification dropped")

    async def drain(self) -> None:
        """Wait until every queued notification has reached the kernel."""
        while self._pending:
            await self._drained.wait()

    async def run(self, *, task_status: trio.TaskStatus[Negotiated] = trio.TASK_STATUS_IGNORED) -> None:
        """Mount, call ``task_status.started(negotiated)`` once INIT is
        answered, serve until unmounted or cancelled, then unmount."""
        channel = self.channel = FuseChannel.open()
        mounted = False
        try:
            fmount.mount(channel.fd, self.mountpoint, source=self.source)
            mounted = True
            send, receive = trio.open_memory_channel[bytes](math.inf)
            self._notify_send = send
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._notifier, channel, receive)
                await self._serve(channel, task_status)
                nursery.cancel_scope.cancel()
        finally:
            self._notify_send = None
            if mounted:
                with trio.CancelScope(shield=True):
                    fmount.unmount(self.mountpoint)
            channel.close()

    async def _serve(self, channel: FuseChannel, task_status: trio.TaskStatus[Negotiated]) -> None:
        session = self.session
        buffer = bytearray(session.buffer_size)
        started = False
        while not session.destroyed:
            try:
                message = await channel.receive(buffer)
            except ChannelClosed:
                return
            reply = session.handle(message)
            if reply is not None:
                channel.send(reply)
            if not started and session.negotiated is not None:
                started = True
                task_status.started(session.negotiated)

    async def _notifier(self, channel: FuseChannel, receive: trio.MemoryReceiveChannel[bytes]) -> None:
        async for message in receive:
            try:
                await trio.to_thread.run_sync(channel.notify, message)
            except OSError as exc:
                log.warning("notification refused by the kernel: %s", exc)
            finally:
                self._pending -= 1
                if not self._pending:
                    self._drained.set()
                    self._drained = trio.Event()
