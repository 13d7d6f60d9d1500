# The session's INIT negotiation and its error discipline, in memory.
from __future__ import annotations

import errno
import struct
from typing import NoReturn

import pytest

from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError
from ipufs.fuse.operations import Operations
from ipufs.fuse.session import Session
from tests.fuse import fakekernel as fk

F = abi.InitFlag
CTX = rq.Context(0, 0, 1)


def init_out(reply: fk.Reply) -> dict[str, int]:
    names = ("major minor max_readahead flags max_background congestion max_write "
             "time_gran max_pages map_alignment flags2 max_stack_depth").split()
    return dict(zip(names, struct.unpack_from("<IIIIHHIIHHII", reply.payload), strict=True))


def test_init_asks_for_passthrough_and_never_writeback_cache() -> None:
    kernel = fk.FakeKernel(Session(Operations()))
    out = init_out(kernel.init_reply)
    flags = out["flags"] | out["flags2"] << 32
    assert (out["major"], out["minor"]) == (7, 40)
    assert flags & F.PASSTHROUGH and flags & F.INIT_EXT
    assert not flags & F.WRITEBACK_CACHE
    assert flags & F.HANDLE_KILLPRIV_V2
    assert out["max_stack_depth"] == 1
    assert out["max_write"] == 1 << 20 and out["max_pages"] == 256


def test_init_without_passthrough_when_switched_off_or_not_offered() -> None:
    for session, offer in ((Session(Operations(), passthrough=False), None),
                           (Session(Operations()), int(F.INIT_EXT | F.ASYNC_READ))):
        out = init_out(fk.FakeKernel(session, offer=offer).init_reply)
        assert not (out["flags2"] << 32) & F.PASSTHROUGH
        assert out["max_stack_depth"] == 0
        assert session.negotiated is not None and not session.negotiated.passthrough


def test_init_agrees_on_the_smaller_minor() -> None:
    session = Session(Operations())
    out = init_out(fk.FakeKernel(session, minor=38).init_reply)
    assert out["minor"] == 38
    assert not (out["flags2"] << 32) & F.PASSTHROUGH  # passthrough needs 7.40


def test_init_from_a_newer_major_answers_with_ours() -> None:
    session = Session(Operations())
    frame = session.handle(fk.encode(rq.Init(2, 0, CTX, 8, 0, 0, 0)))
    assert frame is not None
    assert init_out(fk.decode_reply(frame))["major"] == 7
    assert session.negotiated is None


def test_init_from_an_old_kernel_fails_with_eproto() -> None:
    session = Session(Operations())
    frame = session.handle(fk.encode(rq.Init(2, 0, CTX, 7, 20, 0, 0)))
    assert frame is not None and fk.decode_reply(frame).error == errno.EPROTO


def test_requests_before_init_fail_with_eio() -> None:
    session = Session(Operations())
    frame = session.handle(fk.encode(rq.Lookup(4, 1, CTX, b"ipu0")))
    assert frame is not None and fk.decode_reply(frame).error == errno.EIO


def test_unknown_opcodes_and_default_operations_answer_enosys() -> None:
    kernel = fk.FakeKernel(Session(Operations()))
    assert kernel.call(rq.Unsupported, 1, 999).error == errno.ENOSYS
    assert kernel.call(rq.Unsupported, 1, abi.Opcode.STATX).error == errno.ENOSYS
    assert kernel.call(rq.Lookup, 1, b"x").error == errno.ENOSYS


def test_forget_and_interrupt_take_no_reply() -> None:
    seen: list[tuple[str, int, int]] = []

    class Ops(Operations):
        def forget(self, nodeid: int, nlookup: int) -> None:
            seen.append(("forget", nodeid, nlookup))

        def interrupt(self, target: int) -> None:
            seen.append(("interrupt", target, 0))

    kernel = fk.FakeKernel(Session(Ops()))
    assert kernel.send(rq.Forget(0, 5, CTX, 3)) is None
    assert kernel.send(rq.BatchForget(0, 0, CTX, ((6, 1), (7, 2)))) is None
    assert kernel.send(rq.Interrupt(8, 0, CTX, 4)) is None
    assert seen == [("forget", 5, 3), ("forget", 6, 1), ("forget", 7, 2), ("interrupt", 4, 0)]


def test_handler_errors_become_errno_replies_and_the_session_goes_on() -> None:
    class Ops(Operations):
        def getattr(self, req: rq.Getattr) -> rp.Reply:
            if req.nodeid == 2:
                raise FUSEError(errno.EACCES)
            if req.nodeid == 3:
                raise RuntimeError("a bug")
            return rp.AttrReply(rp.Attr(ino=req.nodeid, mode=0o40755))

    kernel = fk.FakeKernel(Session(Ops()))
    assert kernel.call(rq.Getattr, 2, None).error == errno.EACCES
    assert kernel.call(rq.Getattr, 3, None).error == errno.EIO
    assert kernel.call(rq.Getattr, 1, None).error == 0


def test_malformed_message_is_answered_with_an_error() -> None:
    session = Session(Operations())
    fk.FakeKernel(session)
    bad = fk.encode(rq.Lookup(40, 1, CTX, b"ipu0"))[:-1]  # the NUL is missing
    bad = struct.pack("<I", len(bad)) + bad[4:]
    frame = session.handle(bad)
    assert frame is not None
    reply = fk.decode_reply(frame)
    assert (reply.unique, reply.error) == (40, errno.EIO)


def test_destroy_is_answered_and_ends_the_session() -> None:
    session = Session(Operations())
    kernel = fk.FakeKernel(session)
    assert kernel.call(rq.Destroy, 0).error == 0
    assert session.destroyed


@pytest.mark.parametrize("request_type", rq.OPERATIONS, ids=lambda t: t.__name__)
def test_every_request_reaches_the_operation_it_names(request_type: type[rq.Request]) -> None:
    """A request the dispatch table lost would answer ENOSYS, which the
    kernel takes for "not implemented" (for POLL: always ready)."""
    assert request_type.operation is not None
    reached: list[type[rq.Request]] = []

    def served(self: Operations, req: rq.Request) -> NoReturn:
        reached.append(type(req))
        raise FUSEError(errno.E2BIG)

    ops = type("Ops", (Operations,), {request_type.operation: served})()
    session = Session(ops)
    fk.FakeKernel(session)
    request = object.__new__(request_type)
    for name, value in (("unique", 10), ("nodeid", 2), ("ctx", CTX)):
        object.__setattr__(request, name, value)
    frame = session.dispatch(request)
    assert frame is not None and fk.decode_reply(frame).error == errno.E2BIG
    assert reached == [request_type]


def test_the_session_answers_exactly_the_requests_it_keeps_for_itself() -> None:
    assert set(Session(Operations())._control) == set(rq.SESSION_REQUESTS)
    assert not set(rq.SESSION_REQUESTS) & set(rq.OPERATIONS)
