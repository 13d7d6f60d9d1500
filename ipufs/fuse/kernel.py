# What a filesystem may ask of the kernel outside a reply: register a
# passthrough backing file (FUSE_DEV_IOC_BACKING_OPEN) and send
# notifications (FUSE_NOTIFY_*). The filesystem and the FUSE server both
# receive one KernelLink at construction: the server connects it to its
# transport (ipufs/fuse/transport.py) while mounted, the filesystem uses
# it. So neither needs the other to be built first.
#
# Notifications that may wait on page locks (NOTIFY_STORE,
# NOTIFY_INVAL_INODE) are written from their own thread, so they can never
# block the reader that must answer the READ holding those locks. A reply
# that must not overtake notifications already queued (a store of what the
# request changed, in page-cache mode) is queued behind them on the same
# thread (``send_after``), so the kernel has the new page contents before
# the caller's system call returns.
from __future__ import annotations

import errno
import logging
import queue
import threading
from collections.abc import Callable

import trio

from ipufs.fuse.transport import Transport

log = logging.getLogger(__name__)


class KernelLink:
    """The kernel's side of one mount, as the filesystem sees it."""

    def __init__(self) -> None:
        self.transport: Transport | None = None
        # (message, tag): a notification when tag is None, else a reply to
        # write on tag (-1: an action); None stops the writer.
        self._notes: queue.SimpleQueue[tuple[bytes, int | None, Callable[[], None] | None] | None] = \
            queue.SimpleQueue()
        self._pending = 0
        self._pending_changed = threading.Condition()
        self._writer: threading.Thread | None = None

    def backing_open(self, fd: int) -> int:
        """Register ``fd`` as a passthrough backing file of the connection;
        OSError (EBADF when not mounted, or the kernel's refusal)."""
        if self.transport is None:
            raise OSError(errno.EBADF, "not connected")
        return self.transport.backing_open(fd)

    def notify(self, message: bytes, lost: Callable[[], None] | None = None) -> None:
        """Queue a notification for the kernel (from any thread); ``lost``
        is called (from the writer's thread) when the kernel refuses it: for
        want of the node's inode, because the connection has ended, or
        with any other error."""
        with self._pending_changed:
            self._pending += 1
        self._notes.put((message, None, lost))

    @property
    def busy(self) -> bool:
        """Whether notifications queued so far are still to be written."""
        return self._pending > 0

    def send_after(self, reply: bytes, tag: int) -> None:
        """Write ``reply`` on ``tag`` once every notification queued
        before it has been written (from any thread)."""
        with self._pending_changed:
            self._pending += 1
        self._notes.put((reply, tag, None))

    def call_after(self, action: Callable[[], None]) -> bool:
        """Run ``action`` on the writer's thread once every notification
        queued before it has been written (a signal that must not overtake
        the store of what raised it). False, and nothing queued, when
        nothing waits to be written: then the caller acts itself."""
        if self._writer is None or not self.busy:
            return False
        with self._pending_changed:
            self._pending += 1
        self._notes.put((b"", -1, action))
        return True

    def _wait_drained(self) -> None:
        with self._pending_changed:
            self._pending_changed.wait_for(lambda: self._pending == 0, timeout=10)

    async def drain(self) -> None:
        """Wait until every queued notification has reached the kernel."""
        await trio.to_thread.run_sync(self._wait_drained)

    # --- the server's side ---------------------------------------------------
    def connect(self, transport: Transport) -> None:
        """Serve ``transport``: start the thread that writes notifications."""
        self.transport = transport
        self._writer = threading.Thread(target=self._write_notes, args=(transport,), name="ipufs-notify",
                                        daemon=True)
        self._writer.start()

    async def disconnect(self) -> None:
        """Stop writing notifications (the connection has ended)."""
        if self._writer is not None:
            self._notes.put(None)
            await trio.to_thread.run_sync(self._writer.join, 5)
            self._writer = None
        self.transport = None

    def _write_notes(self, transport: Transport) -> None:
        while True:
            note = self._notes.get()
            if note is None:
                return
            message, fd, lost = note
            try:
                if fd == -1 and lost is not None:
                    lost()  # an action queued by call_after
                elif fd is None:
                    if not transport.notify(message) and lost is not None:
                        lost()
                else:
                    transport.reply(message, fd)
            except OSError as exc:
                log.warning("%s refused by the kernel: %s", "notification" if fd is None else "reply", exc)
                if fd is None and lost is not None:
                    lost()
            except Exception:
                log.exception("an action after notifications failed")
            finally:
                with self._pending_changed:
                    self._pending -= 1
                    self._pending_changed.notify_all()
