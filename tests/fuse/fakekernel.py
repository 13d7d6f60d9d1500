# The kernel's side of the FUSE protocol, for tests: encodes request
# records into the bytes /dev/fuse would deliver, and decodes reply frames.
# Written from linux/fuse.h independently of ipufs.fuse.requests, so that a
# round trip through both checks one against the other.
from __future__ import annotations

import struct
from dataclasses import dataclass

from ipufs.fuse import abi
from ipufs.fuse import requests as rq
from ipufs.fuse.session import Session

O = abi.Opcode
NS = 1_000_000_000


def _z(name: bytes) -> bytes:
    return name + b"\0"


def body_of(r: rq.Request) -> tuple[int, bytes]:
    """(opcode, body) of a request record."""
    match r:
        case rq.Init():
            return O.INIT, struct.pack("<IIIII44x", r.major, r.minor, r.max_readahead,
                                       r.flags & 0xFFFFFFFF, r.flags >> 32)
        case rq.Destroy():
            return O.DESTROY, b""
        case rq.Lookup():
            return O.LOOKUP, _z(r.name)
        case rq.Forget():
            return O.FORGET, struct.pack("<Q", r.nlookup)
        case rq.BatchForget():
            return O.BATCH_FORGET, struct.pack("<II", len(r.forgets), 0) + b"".join(
                struct.pack("<QQ", n, c) for n, c in r.forgets)
        case rq.Getattr():
            return O.GETATTR, struct.pack("<IIQ", 0 if r.fh is None else 1, 0, r.fh or 0)
        case rq.Setattr():
            return O.SETATTR, struct.pack(
                "<IIQQQQQQIIIIIIII", r.valid, 0, r.fh, r.size, 0,
                r.atime_ns // NS, r.mtime_ns // NS, r.ctime_ns // NS,
                r.atime_ns % NS, r.mtime_ns % NS, r.ctime_ns % NS, r.mode, 0, r.uid, r.gid, 0)
        case rq.Readlink():
            return O.READLINK, b""
        case rq.Symlink():
            return O.SYMLINK, _z(r.name) + _z(r.target)
        case rq.Mknod():
            return O.MKNOD, struct.pack("<IIII", r.mode, r.rdev, r.umask, 0) + _z(r.name)
        case rq.Mkdir():
            return O.MKDIR, struct.pack("<II", r.mode, r.umask) + _z(r.name)
        case rq.Unlink():
            return O.UNLINK, _z(r.name)
        case rq.Rmdir():
            return O.RMDIR, _z(r.name)
        case rq.Rename():
            return O.RENAME2, struct.pack("<QII", r.newdir, r.flags, 0) + _z(r.name) + _z(r.newname)
        case rq.Link():
            return O.LINK, struct.pack("<Q", r.oldnodeid) + _z(r.name)
        case rq.Open():
            return O.OPEN, struct.pack("<II", r.flags, 0)
        case rq.Opendir():
            return O.OPENDIR, struct.pack("<II", r.flags, 0)
        case rq.Create():
            return O.CREATE, struct.pack("<IIII", r.flags, r.mode, r.umask, 0) + _z(r.name)
        case rq.Read():
            return O.READ, struct.pack("<QQIIQII", r.fh, r.offset, r.size, 0, 0, r.flags, 0)
        case rq.Write():
            return O.WRITE, struct.pack("<QQIIQII", r.fh, r.offset, len(r.data), r.write_flags,
                                        0, r.flags, 0) + bytes(r.data)
        case rq.Statfs():
            return O.STATFS, b""
        case rq.Release():
            return O.RELEASE, struct.pack("<QIIQ", r.fh, r.flags, r.release_flags, 0)
        case rq.Releasedir():
            return O.RELEASEDIR, struct.pack("<QIIQ", r.fh, 0, 0, 0)
        case rq.Flush():
            return O.FLUSH, struct.pack("<QIIQ", r.fh, 0, 0, r.lock_owner)
        case rq.Fsync():
            return O.FSYNC, struct.pack("<QII", r.fh, int(r.datasync), 0)
        case rq.Fsyncdir():
            return O.FSYNCDIR, struct.pack("<QII", r.fh, int(r.datasync), 0)
        case rq.Setxattr():
            return O.SETXATTR, struct.pack("<II", len(r.value), r.flags) + _z(r.name) + r.value
        case rq.Getxattr():
            return O.GETXATTR, struct.pack("<II", r.size, 0) + _z(r.name)
        case rq.Listxattr():
            return O.LISTXATTR, struct.pack("<II", r.size, 0)
        case rq.Removexattr():
            return O.REMOVEXATTR, _z(r.name)
        case rq.Readdir():
            return (O.READDIRPLUS if r.plus else O.READDIR), struct.pack(
                "<QQIIQII", r.fh, r.offset, r.size, 0, 0, 0, 0)
        case rq.Access():
            return O.ACCESS, struct.pack("<II", r.mask, 0)
        case rq.Interrupt():
            return O.INTERRUPT, struct.pack("<Q", r.target)
        case rq.Ioctl():
            return O.IOCTL, struct.pack("<QIIQII", r.fh, r.flags, r.cmd, r.arg, len(r.in_data),
                                        r.out_size) + bytes(r.in_data)
        case rq.Poll():
            return O.POLL, struct.pack("<QQII", r.fh, r.kh, r.flags, r.events)
        case rq.Lseek():
            return O.LSEEK, struct.pack("<QQII", r.fh, r.offset, r.whence, 0)
        case rq.Fallocate():
            return O.FALLOCATE, struct.pack("<QQQII", r.fh, r.offset, r.length, r.mode, 0)
        case rq.Unsupported():
            return r.opcode, b""
    raise TypeError(f"no encoder for {type(r).__name__}")


def encode(r: rq.Request) -> bytes:
    opcode, body = body_of(r)
    header = struct.pack("<IIQQIIIHH", 40 + len(body), opcode, r.unique, r.nodeid,
                         r.ctx.uid, r.ctx.gid, r.ctx.pid, 0, 0)
    return header + body


@dataclass
class Reply:
    unique: int
    error: int  # positive errno, 0 for success
    payload: bytes


def decode_reply(frame: bytes) -> Reply:
    length, error, unique = struct.unpack_from("<IiQ", frame)
    assert length == len(frame), "reply length disagrees with its header"
    return Reply(unique, -error, frame[16:])


class FakeKernel:
    """Drives a Session in memory: INIT first, then one request at a time."""

    def __init__(self, session: Session, *, offer: int | None = None, minor: int = 44) -> None:
        self.session = session
        self.unique = 0
        self.ctx = rq.Context(0, 0, 4242)
        flags = offer if offer is not None else (1 << 42) - 1
        reply = self.send(rq.Init(self.next_unique(), 0, self.ctx, 7, minor, 131072, flags))
        assert reply is not None and reply.error == 0, reply
        self.init_reply = reply

    def next_unique(self) -> int:
        self.unique += 2
        return self.unique

    def send(self, r: rq.Request) -> Reply | None:
        frame = self.session.handle(encode(r))
        return None if frame is None else decode_reply(frame)

    def call(self, cls: type[rq.Request], nodeid: int = 1, *args: object,
             ctx: rq.Context | None = None) -> Reply:
        """Build ``cls(unique, nodeid, ctx, *args)``, send it, return the reply."""
        reply = self.send(cls(self.next_unique(), nodeid, ctx or self.ctx, *args))  # type: ignore[call-arg]
        assert reply is not None, "request got no reply"
        return reply
