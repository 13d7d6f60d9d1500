# The transport seam (ipufs/fuse/transport.py): a FuseServer's request loop
# and its KernelLink run over any Transport. Here a scripted one in memory
# stands in for /dev/fuse: requests come from a list, each with its own
# tag, and the replies must go back on the tags they came with, in order;
# notifications and replies queued behind them go through it too.
from __future__ import annotations

import errno
import struct
import threading

import pytest
import trio

from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError
from ipufs.fuse.kernel import KernelLink
from ipufs.fuse.operations import Operations
from ipufs.fuse.server import FuseServer
from ipufs.fuse.transport import Transport
from tests.fuse import fakekernel as fk

CTX = rq.Context(0, 0, 4242)


class Scripted:
    """A Transport that delivers ``script`` (request bytes, tag) and then
    says the connection ended. It needs FUSE_OVER_IO_URING agreed, as
    the io_uring transport does."""

    init_flags = 1 << 41

    def __init__(self, script: list[tuple[bytes, int]]) -> None:
        self.script = list(script)
        self.initialized_with: list[int] = []
        self.replies: list[tuple[fk.Reply, int]] = []
        self.unanswered_tags: list[int] = []
        self.notes: list[bytes] = []
        self.receives = 0
        self.closed = False

    def mount_fd(self) -> int:
        return -1

    def mounted(self) -> None:
        pass

    def initialized(self, flags: int) -> None:
        self.initialized_with.append(flags)

    def receive(self, buffer: bytearray) -> tuple[int, int] | None:
        self.receives += 1
        if not self.script:
            return None
        message, tag = self.script.pop(0)
        buffer[:len(message)] = message
        return len(message), tag

    def reply(self, message: bytes, tag: int) -> bool:
        self.replies.append((fk.decode_reply(message), tag))
        return True

    def unanswered(self, message: bytes | memoryview, tag: int) -> None:
        self.unanswered_tags.append(tag)

    def notify(self, message: bytes) -> bool:
        self.notes.append(message)
        return True

    def backing_open(self, fd: int) -> int:
        raise OSError(errno.EPERM, "no backing files in memory")

    def connected(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


class NoNames(Operations):
    def lookup(self, req: rq.Lookup) -> object:  # type: ignore[override]
        raise FUSEError(errno.ENOENT)


def server() -> FuseServer:
    return FuseServer(NoNames(), KernelLink(), "/nowhere", passthrough=False, lock=threading.RLock())


def init(unique: int) -> bytes:
    return fk.encode(rq.Init(unique, 0, CTX, 7, 44, 131072, (1 << 42) - 1))


def test_a_scripted_transport_drives_the_server_loop() -> None:
    transport = Scripted([
        (init(2), 10),
        (fk.encode(rq.Lookup(4, 1, CTX, b"missing")), 11),
        (fk.encode(rq.Forget(6, 5, CTX, 1)), 12),  # answered with nothing
        (fk.encode(rq.Lookup(8, 1, CTX, b"gone")), 13),
    ])
    fuse = server()
    started: list[bool] = []
    fuse.serve(transport, lambda: started.append(fuse.session.negotiated is not None))
    assert started == [True]  # once, after INIT was answered
    # The session asked for what the transport needs; the transport heard
    # what was agreed, once, before the next request.
    assert transport.initialized_with == [fuse.session.negotiated.flags]  # type: ignore[union-attr]
    assert transport.initialized_with[0] & Scripted.init_flags
    assert [(r.unique, r.error, tag) for r, tag in transport.replies] == [
        (2, 0, 10), (4, errno.ENOENT, 11), (8, errno.ENOENT, 13)]
    # FORGET takes no reply: what receiving it holds (an io_uring entry)
    # is given back all the same, and only for it
    assert transport.unanswered_tags == [12]
    assert transport.receives == 5  # the fifth said the connection ended


def test_the_loop_ends_when_the_session_is_destroyed() -> None:
    transport = Scripted([(init(2), 1), (fk.encode(rq.Destroy(4, 0, CTX)), 2),
                          (fk.encode(rq.Lookup(6, 1, CTX, b"late")), 3)])
    server().serve(transport)
    assert transport.receives == 2 and len(transport.script) == 1


def test_the_kernel_link_writes_through_the_transport() -> None:
    transport: Transport = Scripted([])
    link = KernelLink()

    async def main() -> None:
        link.connect(transport)
        link.notify(b"note")
        link.send_after(struct.pack("<IiQ", 16, 0, 2), 7)  # a reply to unique 2: a bare header
        with trio.fail_after(5):
            await link.drain()
        await link.disconnect()

    link.notify(b"early")  # before connecting: kept, in order
    trio.run(main)
    assert isinstance(transport, Scripted)
    assert transport.notes == [b"early", b"note"]
    assert [(r.unique, tag) for r, tag in transport.replies] == [(2, 7)]


class Watching(Scripted):
    """Scripted, noting whether the server held its lock as it replied."""

    def __init__(self, script: list[tuple[bytes, int]], lock: threading.RLock) -> None:
        super().__init__(script)
        self.lock = lock
        self.held: list[bool] = []

    def reply(self, message: bytes, tag: int) -> bool:
        self.held.append(self.lock._is_owned())  # type: ignore[attr-defined]
        return super().reply(message, tag)


def test_a_request_that_finds_the_lock_taken_says_so_and_is_answered_before_it_lets_go() -> None:
    # The byte is what the executor's native loop reads to end its run
    # (ipufs/daemon/execution.py); the reply goes out while the server
    # still holds the lock, before a thread waiting for it takes the GIL.
    fuse = server()
    transport = Watching([(init(2), 10), (fk.encode(rq.Lookup(4, 1, CTX, b"missing")), 11)], fuse.lock)
    fuse.lock.acquire()
    try:
        serving = threading.Thread(target=fuse.serve, args=(transport,))
        serving.start()
        for _ in range(2000):
            if fuse.contended[0]:
                break
            threading.Event().wait(0.001)
        assert fuse.contended[0] == 1 and fuse.waiting and not transport.replies
    finally:
        fuse.lock.release()
    serving.join(10)
    assert not serving.is_alive()
    assert fuse.contended[0] == 0 and not fuse.waiting
    assert [(r.unique, tag) for r, tag in transport.replies] == [(2, 10), (4, 11)] and transport.held == [True, True]


class Quietly:
    """A lock that may be taken quietly: it notes how each request took it
    and what the operations saw."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.taken: list[str] = []
        self.stilled = False
        self.depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.taken.append("usual")
        return self._take(blocking, timeout)

    def acquire_quietly(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.taken.append("quietly")
        self.stilled = False
        return self._take(blocking, timeout)

    def _take(self, blocking: bool, timeout: float) -> bool:
        got = self.lock.acquire(blocking, timeout)
        self.depth += got
        return got

    def still(self) -> None:
        self.stilled = True

    def release(self) -> None:
        self.depth -= 1
        self.lock.release()


class Seen(NoNames):
    def __init__(self, lock: Quietly) -> None:
        self.lock = lock
        self.seen: list[tuple[bytes, bool]] = []

    def lookup(self, req: rq.Lookup) -> object:  # type: ignore[override]
        self.seen.append((req.name, self.lock.stilled))
        raise FUSEError(errno.ENOENT)


def test_requests_the_predicate_accepts_take_the_lock_quietly_and_the_rest_in_full() -> None:
    lock = Quietly()
    ops = Seen(lock)
    asked: list[bytes] = []

    def quiet(message: memoryview) -> bool:
        assert lock.depth == 1  # asked under the lock
        asked.append(bytes(message[40:]))
        return bytes(message[40:]) == b"quiet\0"

    fuse = FuseServer(ops, KernelLink(), "/nowhere", passthrough=False, lock=lock,  # type: ignore[arg-type]
                      quiet=quiet)
    fuse.serve(Scripted([(init(2), 1), (fk.encode(rq.Lookup(4, 1, CTX, b"quiet")), 2),
                         (fk.encode(rq.Lookup(6, 1, CTX, b"loud")), 3)]))
    assert set(lock.taken) == {"quietly"} and len(asked) == 3
    assert ops.seen == [(b"quiet", False), (b"loud", True)]  # the loud one found it taken in full
    with pytest.raises(TypeError, match="taken quietly"):
        FuseServer(ops, KernelLink(), "/nowhere", passthrough=False, lock=threading.RLock(), quiet=quiet)


def test_a_failing_predicate_takes_the_lock_in_full_and_the_reader_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    lock = Quietly()
    ops = Seen(lock)

    def quiet(message: memoryview) -> bool:
        raise ValueError("a bug of the predicate's")

    fuse = FuseServer(ops, KernelLink(), "/nowhere", passthrough=False, lock=lock,  # type: ignore[arg-type]
                      quiet=quiet)
    transport = Scripted([(init(2), 1), (fk.encode(rq.Lookup(4, 1, CTX, b"a")), 2),
                          (fk.encode(rq.Lookup(6, 1, CTX, b"b")), 3)])
    fuse.serve(transport)
    assert ops.seen == [(b"a", True), (b"b", True)]  # both served, each with the lock in full
    assert [(r.unique, r.error) for r, _ in transport.replies] == [(2, 0), (4, errno.ENOENT), (6, errno.ENOENT)]
    assert "deciding how to take the lock" in caplog.text
