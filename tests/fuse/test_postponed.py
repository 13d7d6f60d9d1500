# Requests a handler postpones until the kernel answers a retrieve
# notification (page-cache mode, docs/filesystem.md): the session keeps
# them, answers nothing, and handles them again when the operations say
# so; the wire format of FUSE_NOTIFY_RETRIEVE and of its NOTIFY_REPLY.
from __future__ import annotations

from ipufs.fuse import abi, decoding
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import Postponed
from ipufs.fuse.operations import Operations
from ipufs.fuse.session import Session
from tests.fuse import fakekernel as fk

CTX = rq.Context(0, 0, 42)


def notify_reply(notify_unique: int, nodeid: int, offset: int, data: bytes) -> bytes:
    body = abi.NOTIFY_RETRIEVE_IN.pack(0, offset, len(data), 0, 0, 0) + data
    return abi.IN_HEADER.pack(abi.IN_HEADER.size + len(body), abi.Opcode.NOTIFY_REPLY, notify_unique, nodeid,
                              0, 0, 0, 0, 0) + body


def test_a_retrieve_names_its_unique_node_and_range() -> None:
    message = rp.notify_retrieve(7, 3, 4096, 8192)
    length, code, unique = abi.OUT_HEADER.unpack_from(message)
    assert (length, code, unique) == (len(message), abi.NotifyCode.RETRIEVE, 0)
    assert abi.NOTIFY_RETRIEVE.unpack_from(message, abi.OUT_HEADER.size) == (7, 3, 4096, 8192, 0)
    assert len(message) == abi.OUT_HEADER.size + 32  # sizeof(struct fuse_notify_retrieve_out)


def test_a_notify_reply_decodes_to_its_bytes_and_a_short_one_is_refused_without_reply() -> None:
    request = decoding.decode(notify_reply(9, 3, 4096, b"abcd"))
    assert isinstance(request, rq.NotifyReply)
    assert (request.unique, request.nodeid, request.offset, bytes(request.data)) == (9, 3, 4096, b"abcd")
    bad = bytearray(notify_reply(9, 3, 0, b"abcd"))
    abi.NOTIFY_RETRIEVE_IN.pack_into(bad, abi.IN_HEADER.size, 0, 0, 8, 0, 0, 0)  # says 8 bytes, 4 follow
    session = Session(Operations())
    assert session.handle(bytes(bad)) is None  # a NOTIFY_REPLY takes no reply, even an error


def test_a_postponed_request_is_answered_once_the_operations_let_it_go() -> None:
    calls: list[int] = []

    class Ops(Operations):
        def __init__(self) -> None:
            self.cleared: set[int] = set()

        def getattr(self, req: rq.Getattr) -> rp.Reply:
            calls.append(req.unique)
            if req.unique not in self.cleared:
                raise Postponed
            return rp.AttrReply(rp.Attr(ino=req.nodeid, mode=0o100644))

        def notify_reply(self, req: rq.NotifyReply) -> list[int]:
            self.cleared.add(req.offset)  # this test's convention: the offset names the request
            return [req.offset]

    session = Session(Ops())
    kernel = fk.FakeKernel(session)
    unique = kernel.next_unique()
    assert session.handle(fk.encode(rq.Getattr(unique, 2, CTX, None)), "fd-5") is None
    assert session.postponed == 1 and session.outbox == []
    assert session.handle(notify_reply(1, 2, unique, b""), "fd-6") is None
    assert session.postponed == 0 and calls == [unique, unique]
    [(reply, tag, may_wait)] = session.outbox
    assert tag == "fd-5" and may_wait  # answered on the fd it came from
    assert fk.decode_reply(reply).unique == unique and fk.decode_reply(reply).error == 0


def test_replies_the_kernel_waits_for_under_page_locks_never_wait() -> None:
    ops = Operations()
    assert not ops.reply_may_wait(rq.Read(2, 2, CTX, 1, 0, 4096, 0))
    assert not ops.reply_may_wait(rq.Write(4, 2, CTX, 1, 0, memoryview(b"x"), 0, 0))
    assert ops.reply_may_wait(rq.Ioctl(6, 2, CTX, 1, 0, 0, 0, memoryview(b""), 0))


def test_a_notify_reply_that_lets_a_request_go_only_to_postpone_it_again_is_still_unanswered() -> None:
    """``kept`` is about the request ``handle`` took, not one it handled
    within: a NOTIFY_REPLY takes no reply, whatever the request it let go
    did (here: postponed again), so its io_uring entry goes back."""

    class Ops(Operations):
        def getattr(self, req: rq.Getattr) -> rp.Reply:
            raise Postponed  # never let through

        def notify_reply(self, req: rq.NotifyReply) -> list[int]:
            return [req.offset]

    session = Session(Ops())
    unique = fk.FakeKernel(session).next_unique()
    assert session.handle(fk.encode(rq.Getattr(unique, 2, CTX, None))) is None
    assert session.kept and session.postponed == 1
    assert session.handle(notify_reply(5, 2, unique, b"")) is None
    assert not session.kept  # the NOTIFY_REPLY's own: it takes none
    assert session.postponed == 1 and session.outbox == []  # the request went back to waiting
