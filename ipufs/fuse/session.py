# The FUSE session, sans-IO: one message from the kernel in, at most one
# reply message out. It negotiates INIT, dispatches every other request to
# the Operations method named after it, and turns failures into errno
# replies so that no request can stop the session. A handler may postpone
# its request (errors.Postponed) until the kernel has answered a retrieve
# notification: the session keeps the message and handles it again when
# the operations say so; its reply then waits in ``outbox``.
from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import Any

from ipufs.fuse import abi, decoding
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError, Postponed, ProtocolError
from ipufs.fuse.operations import Negotiated, Operations

log = logging.getLogger(__name__)

F = abi.InitFlag
#: What ipufs asks of every kernel. Never FUSE_WRITEBACK_CACHE: it switches
#: passthrough off and would delay client writes to config space.
WANTED_FLAGS = (
    F.ASYNC_READ
    | F.BIG_WRITES
    | F.MAX_PAGES
    | F.PARALLEL_DIROPS
    | F.INIT_EXT
    | F.DIRECT_IO_ALLOW_MMAP
    | F.EXPLICIT_INVAL_DATA
    | F.ABORT_ERROR
    # The filesystem kills setuid/setgid bits itself, so the kernel may mark
    # inodes S_NOSEC and skip its per-write security.capability lookup.
    | F.HANDLE_KILLPRIV_V2
)
PAGE_SIZE = 4096

def _check_operations() -> None:
    """Every request record names a method of Operations (fail at import)."""
    missing = [cls.__name__ for cls in rq.OPERATIONS
               if not callable(getattr(Operations, cls.operation or "", None))]
    if missing:
        raise ImportError(f"requests without an Operations method: {missing}")


_check_operations()


class Session:
    """Serves one FUSE connection for ``operations``.

    ``handle(message, tag)`` takes the bytes of one read from /dev/fuse and
    returns the reply to write back, or None when the request takes none
    (FORGET, BATCH_FORGET, INTERRUPT, NOTIFY_REPLY) or was postponed. The
    replies of postponed requests handled since appear in ``outbox`` as
    (reply, tag, may_wait): ``tag`` is the caller's (the fd to answer on).
    ``kept`` says whether the request ``handle`` took last was postponed
    (its reply comes later) rather than one that takes none.
    """

    def __init__(
        self,
        operations: Operations,
        *,
        passthrough: bool = True,
        max_write: int = 1 << 20,
    ) -> None:
        self.operations = operations
        self.want = WANTED_FLAGS | (F.PASSTHROUGH if passthrough else 0)
        self.max_write = max_write
        self.negotiated: Negotiated | None = None
        self.destroyed = False
        self.requests = 0  # messages handled, for status and benchmarks
        self.outbox: list[tuple[bytes, object, bool]] = []
        #: The request ``handle`` decoded last (may_wait() asks about it).
        self._last: rq.Request | None = None
        self._postponed: dict[int, tuple[bytes, object]] = {}  # unique -> (message, tag)
        self.kept = False
        # Request type -> handler. Until INIT is answered only the requests
        # that need no negotiation are served; INIT swaps in the full table,
        # so the state is the table and no request pays for a check.
        self._control: dict[type[rq.Request], Callable[[Any], rp.Reply | None]] = {
            rq.Init: self._init,
            rq.Forget: self._forget,
            rq.BatchForget: self._batch_forget,
            rq.Interrupt: self._interrupt,
            rq.Destroy: self._destroy,
            rq.NotifyReply: self._notify_reply,
        }
        self._handlers = self._control
        self._served: dict[type[rq.Request], Callable[[Any], rp.Reply | None]] = {
            **{cls: getattr(operations, str(cls.operation)) for cls in rq.OPERATIONS}, **self._control,
        }

    @property
    def buffer_size(self) -> int:
        """How large a buffer each read from /dev/fuse needs."""
        return self.max_write + PAGE_SIZE

    def handle(self, message: bytes | bytearray | memoryview, tag: object = None) -> bytes | None:
        self.requests += 1
        self.kept = False
        try:
            request = decoding.decode(message)
        except ProtocolError as exc:
            log.warning("malformed request from the kernel: %s", exc)
            return rp.frame(exc.unique, error=exc.errno) if exc.unique else None
        try:
            self._last = request
            reply = self.dispatch(request)
        except Postponed:
            self._postponed[request.unique] = (bytes(message), tag)
            self.kept = True
            return None
        self.kept = False  # a request handled within this one (a postponed one let go) set its own
        return reply

    def may_wait(self) -> bool:
        """Whether the reply to the request ``handle`` took last may wait
        behind queued notifications (Operations.reply_may_wait). Asked only
        when some are queued, so that a request pays nothing for it else."""
        return self._last is not None and self.operations.reply_may_wait(self._last)

    @property
    def postponed(self) -> int:
        """How many requests wait for the kernel's answer to a retrieve."""
        return len(self._postponed)

    def _notify_reply(self, req: rq.NotifyReply) -> None:
        for unique in self.operations.notify_reply(req):
            kept = self._postponed.pop(unique, None)
            if kept is not None:
                reply = self.handle(*kept)
                if reply is not None:
                    self.outbox.append((reply, kept[1], self.may_wait()))

    def dispatch(self, request: rq.Request) -> bytes | None:
        """Serve one decoded request; its reply, or None. Raises Postponed
        when the handler postponed it (``handle`` keeps it)."""
        unique = request.unique
        try:
            handler = self._handlers.get(type(request))
            if handler is None:
                if self.negotiated is None and type(request) in self._served:
                    raise FUSEError(errno.EIO, "request before INIT")
                raise FUSEError(errno.ENOSYS)
            reply = handler(request)
            return None if reply is None else rp.frame(unique, reply.encode())
        except FUSEError as exc:
            return rp.frame(unique, error=exc.errno)
        except Postponed:
            raise
        except Exception:
            log.exception("handler failed on %r", request)
            return rp.frame(unique, error=errno.EIO)

    def _forget(self, req: rq.Forget) -> None:
        self.operations.forget(req.nodeid, req.nlookup)

    def _batch_forget(self, req: rq.BatchForget) -> None:
        for nodeid, nlookup in req.forgets:
            self.operations.forget(nodeid, nlookup)

    def _interrupt(self, req: rq.Interrupt) -> None:
        self.operations.interrupt(req.target)

    def _destroy(self, req: rq.Destroy) -> rp.Reply:
        self.destroyed = True
        self.operations.destroy()
        return rp.Empty()

    def _init(self, req: rq.Init) -> rp.InitReply:
        if req.major > abi.KERNEL_VERSION:
            # Tell the kernel our major; it sends INIT again with it.
            return rp.InitReply(abi.KERNEL_VERSION, abi.KERNEL_MINOR_VERSION, 0, 0)
        if req.major < abi.KERNEL_VERSION or req.minor < abi.MIN_KERNEL_MINOR_VERSION:
            raise FUSEError(
                errno.EPROTO,
                f"kernel protocol {req.major}.{req.minor} is older than "
                f"{abi.KERNEL_VERSION}.{abi.MIN_KERNEL_MINOR_VERSION}",
            )
        minor = min(req.minor, abi.KERNEL_MINOR_VERSION)
        flags = req.flags & self.want
        if minor < 40:
            flags &= ~F.PASSTHROUGH
        max_pages = self.max_write // PAGE_SIZE
        negotiated = Negotiated(minor, int(flags), self.max_write, req.max_readahead)
        self.operations.init(negotiated)
        self.negotiated = negotiated
        self._handlers = self._served
        return rp.InitReply(
            major=abi.KERNEL_VERSION,
            minor=minor,
            max_readahead=req.max_readahead,
            flags=int(flags),
            max_write=self.max_write,
            max_pages=max_pages,
            max_stack_depth=1 if flags & F.PASSTHROUGH else 0,
        )
