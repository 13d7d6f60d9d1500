# Property tests of the sans-IO core: any bytes either decode or raise the
# core's ProtocolError; records survive a trip through the kernel's encoder
# and ipufs's decoder; a session answers anything without raising.
from __future__ import annotations

import struct

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ipufs.fuse import abi
from ipufs.fuse import requests as rq
from ipufs.fuse.decoding import decode
from ipufs.fuse.errors import ProtocolError
from ipufs.fuse.operations import Operations
from ipufs.fuse.session import Session
from tests.fuse import fakekernel as fk

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
name = st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b)
ctx = st.builds(rq.Context, u32, u32, u32)


def header(opcode: int, body: bytes, unique: int = 2) -> bytes:
    return struct.pack("<IIQQIIIHH", 40 + len(body), opcode, unique, 1, 0, 0, 1, 0, 0) + body


@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    try:
        decode(data)
    except ProtocolError:
        pass


@given(st.sampled_from(list(abi.Opcode)), st.binary(max_size=120))
@example(abi.Opcode.NOTIFY_REPLY, b"")
@example(abi.Opcode.NOTIFY_REPLY, bytes(16) + b"\xff" * 4 + bytes(20) + b"x")
def test_random_bodies_of_every_opcode(opcode: abi.Opcode, body: bytes) -> None:
    try:
        request = decode(header(opcode, body))
    except ProtocolError as exc:
        # A malformed NOTIFY_REPLY gets no reply (the kernel waits for none),
        # so its error carries no request to answer.
        assert exc.unique == (0 if opcode == abi.Opcode.NOTIFY_REPLY else 2)
    else:
        assert request.unique == 2


def records() -> st.SearchStrategy[rq.Request]:
    def r(cls: type, *fields: st.SearchStrategy[object]) -> st.SearchStrategy[rq.Request]:
        return st.builds(cls, u64, u64, ctx, *fields)

    return st.one_of(
        r(rq.Lookup, name),
        r(rq.Forget, u64),
        r(rq.BatchForget, st.lists(st.tuples(u64, u64), max_size=5).map(tuple)),
        r(rq.Getattr, st.none() | u64),
        r(rq.Open, u32),
        r(rq.Read, u64, u64, u32, u32),
        r(rq.Write, u64, u64, st.binary(max_size=64).map(memoryview), u32, u32),
        r(rq.Release, u64, u32, u32),
        r(rq.Flush, u64, u64),
        r(rq.Fsync, u64, st.booleans()),
        r(rq.Getxattr, name, u32),
        r(rq.Setxattr, name, st.binary(max_size=20), u32),
        r(rq.Listxattr, u32),
        r(rq.Removexattr, name),
        r(rq.Readdir, u64, u64, u32, st.booleans()),
        r(rq.Ioctl, u64, u32, u32, u64, st.binary(max_size=32).map(memoryview), u32),
        r(rq.Poll, u64, u64, u32, u32),
        r(rq.Lseek, u64, u64, u32),
        r(rq.Interrupt, u64),
        r(rq.Mkdir, name, u32, u32),
        r(rq.Mknod, name, u32, u32, u32),
        r(rq.Create, name, u32, u32, u32),
        r(rq.Rename, name, u64, name, u32),
        r(rq.Link, u64, name),
        r(rq.Symlink, name, name),
        r(rq.Unlink, name),
        r(rq.Access, u32),
    )


@given(records())
def test_records_round_trip_through_the_kernel_encoding(record: rq.Request) -> None:
    assert decode(fk.encode(record)) == record


@settings(max_examples=300)
@given(st.sampled_from(list(abi.Opcode)), st.binary(max_size=120), u64)
def test_session_answers_anything_without_raising(opcode: abi.Opcode, body: bytes, unique: int) -> None:
    session = Session(Operations())
    kernel = fk.FakeKernel(session)
    frame = session.handle(header(opcode, body, unique))
    if frame is not None:
        reply = fk.decode_reply(frame)
        assert reply.unique == unique
        assert reply.error >= 0
    assert kernel.init_reply.error == 0
