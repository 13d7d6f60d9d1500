# Turning bytes into requests: the table from opcode to decoder that makes
# one message read from /dev/fuse into one request record (linux/fuse.h,
# protocol 7.40), or raises ProtocolError. Pure: bytes in, records out; no
# I/O. A short body is found by struct.error, cheaper than checking every
# length first.
from __future__ import annotations

import struct
from collections.abc import Callable

from ipufs.fuse import abi
from ipufs.fuse.errors import ProtocolError
from ipufs.fuse.requests import (
    Access, BatchForget, Bmap, Context, CopyFileRange, Create, Destroy, Fallocate, Flush, Forget, Fsync,
    Fsyncdir, Getattr, Getxattr, Init, Interrupt, Ioctl, Link, Listxattr, Lock, Lookup, Lseek, Mkdir, Mknod,
    NotifyReply, Open, Opendir, Poll, Read, Readdir, Readlink, Release, Releasedir, Removexattr, Rename, Request, Rmdir,
    Setattr, Setxattr, Statfs, Symlink, Unlink, Unsupported, Write,
)

Decoder = Callable[[int, int, Context, memoryview], Request]


def _unpack(st: struct.Struct, body: memoryview, unique: int) -> tuple[int, ...]:
    try:
        return st.unpack_from(body)
    except struct.error:  # shorter than the struct (cheaper than checking first)
        raise ProtocolError(f"body of {len(body)} bytes, expected at least {st.size}", unique=unique) from None


def _names(body: memoryview, count: int, unique: int) -> list[bytes]:
    """Split ``count`` NUL-terminated names off the front of ``body``."""
    raw = bytes(body)
    names: list[bytes] = []
    start = 0
    for _ in range(count):
        end = raw.find(b"\0", start)
        if end < 0:
            raise ProtocolError("name without a terminating NUL", unique=unique)
        names.append(raw[start:end])
        start = end + 1
    return names


def _lookup(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Lookup(u, n, c, _names(b, 1, u)[0])


def _forget(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Forget(u, n, c, _unpack(abi.FORGET_IN, b, u)[0])


def _batch_forget(u: int, n: int, c: Context, b: memoryview) -> Request:
    count, _ = _unpack(abi.BATCH_FORGET_IN, b, u)
    items = b[abi.BATCH_FORGET_IN.size :]
    if len(items) < count * abi.FORGET_ONE.size:
        raise ProtocolError(f"BATCH_FORGET of {count} with a short body", unique=u)
    forgets = tuple(abi.FORGET_ONE.iter_unpack(items[: count * abi.FORGET_ONE.size]))
    return BatchForget(u, n, c, forgets)


def _getattr(u: int, n: int, c: Context, b: memoryview) -> Request:
    flags, _, fh = _unpack(abi.GETATTR_IN, b, u)
    return Getattr(u, n, c, fh if flags & abi.GETATTR_FH else None)


def _setattr(u: int, n: int, c: Context, b: memoryview) -> Request:
    (valid, _, fh, size, _owner, atime, mtime, ctime, atimensec, mtimensec, ctimensec,
     mode, _, uid, gid, _) = _unpack(abi.SETATTR_IN, b, u)
    ns = 1_000_000_000
    return Setattr(u, n, c, valid, fh, size, atime * ns + atimensec, mtime * ns + mtimensec,
                   ctime * ns + ctimensec, mode, uid, gid)


def _empty(cls: type[Request]) -> Decoder:
    def decode(u: int, n: int, c: Context, b: memoryview) -> Request:
        return cls(u, n, c)

    return decode


def _symlink(u: int, n: int, c: Context, b: memoryview) -> Request:
    name, target = _names(b, 2, u)
    return Symlink(u, n, c, name, target)


def _mknod(u: int, n: int, c: Context, b: memoryview) -> Request:
    mode, rdev, umask, _ = _unpack(abi.MKNOD_IN, b, u)
    return Mknod(u, n, c, _names(b[abi.MKNOD_IN.size :], 1, u)[0], mode, rdev, umask)


def _mkdir(u: int, n: int, c: Context, b: memoryview) -> Request:
    mode, umask = _unpack(abi.MKDIR_IN, b, u)
    return Mkdir(u, n, c, _names(b[abi.MKDIR_IN.size :], 1, u)[0], mode, umask)


def _unlink(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Unlink(u, n, c, _names(b, 1, u)[0])


def _rmdir(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Rmdir(u, n, c, _names(b, 1, u)[0])


def _rename(u: int, n: int, c: Context, b: memoryview) -> Request:
    (newdir,) = _unpack(abi.RENAME_IN, b, u)
    old, new = _names(b[abi.RENAME_IN.size :], 2, u)
    return Rename(u, n, c, old, newdir, new, 0)


def _rename2(u: int, n: int, c: Context, b: memoryview) -> Request:
    newdir, flags, _ = _unpack(abi.RENAME2_IN, b, u)
    old, new = _names(b[abi.RENAME2_IN.size :], 2, u)
    return Rename(u, n, c, old, newdir, new, flags)


def _link(u: int, n: int, c: Context, b: memoryview) -> Request:
    (old,) = _unpack(abi.LINK_IN, b, u)
    return Link(u, n, c, old, _names(b[abi.LINK_IN.size :], 1, u)[0])


def _open(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Open(u, n, c, _unpack(abi.OPEN_IN, b, u)[0])


def _opendir(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Opendir(u, n, c, _unpack(abi.OPEN_IN, b, u)[0])


def _create(u: int, n: int, c: Context, b: memoryview) -> Request:
    flags, mode, umask, _ = _unpack(abi.CREATE_IN, b, u)
    return Create(u, n, c, _names(b[abi.CREATE_IN.size :], 1, u)[0], flags, mode, umask)


def _read(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, offset, size, _, _, flags, _ = _unpack(abi.READ_IN, b, u)
    return Read(u, n, c, fh, offset, size, flags)


def _write(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, offset, size, write_flags, _, flags, _ = _unpack(abi.WRITE_IN, b, u)
    data = b[abi.WRITE_IN.size :]
    if len(data) != size:
        raise ProtocolError(f"WRITE of {size} bytes carries {len(data)}", unique=u)
    return Write(u, n, c, fh, offset, data, write_flags, flags)


def _release(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, flags, release_flags, _ = _unpack(abi.RELEASE_IN, b, u)
    return Release(u, n, c, fh, flags, release_flags)


def _releasedir(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Releasedir(u, n, c, _unpack(abi.RELEASE_IN, b, u)[0])


def _flush(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, _, _, owner = _unpack(abi.FLUSH_IN, b, u)
    return Flush(u, n, c, fh, owner)


def _fsync(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, flags, _ = _unpack(abi.FSYNC_IN, b, u)
    return Fsync(u, n, c, fh, bool(flags & 1))


def _fsyncdir(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, flags, _ = _unpack(abi.FSYNC_IN, b, u)
    return Fsyncdir(u, n, c, fh, bool(flags & 1))


def _setxattr(u: int, n: int, c: Context, b: memoryview) -> Request:
    # ipufs never negotiates FUSE_SETXATTR_EXT (session.WANTED_FLAGS), so
    # fuse_setxattr_in always has its compat layout (size, flags).
    st = abi.SETXATTR_IN_COMPAT
    size, flags = _unpack(st, b, u)[:2]
    rest = b[st.size :]
    (name,) = _names(rest, 1, u)
    value = bytes(rest[len(name) + 1 : len(name) + 1 + size])
    if len(value) != size:
        raise ProtocolError(f"SETXATTR value of {size} bytes is short", unique=u)
    return Setxattr(u, n, c, name, value, flags)


def _getxattr(u: int, n: int, c: Context, b: memoryview) -> Request:
    size, _ = _unpack(abi.GETXATTR_IN, b, u)
    return Getxattr(u, n, c, _names(b[abi.GETXATTR_IN.size :], 1, u)[0], size)


def _listxattr(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Listxattr(u, n, c, _unpack(abi.GETXATTR_IN, b, u)[0])


def _removexattr(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Removexattr(u, n, c, _names(b, 1, u)[0])


def _readdir(plus: bool) -> Decoder:
    def decode(u: int, n: int, c: Context, b: memoryview) -> Request:
        fh, offset, size, _, _, _, _ = _unpack(abi.READ_IN, b, u)
        return Readdir(u, n, c, fh, offset, size, plus)

    return decode


def _lock(opcode: int) -> Decoder:
    def decode(u: int, n: int, c: Context, b: memoryview) -> Request:
        fh, owner, start, end, type_, pid, lk_flags, _ = _unpack(abi.LK_IN, b, u)
        return Lock(u, n, c, opcode, fh, owner, start, end, type_, pid, lk_flags)

    return decode


def _access(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Access(u, n, c, _unpack(abi.ACCESS_IN, b, u)[0])


def _interrupt(u: int, n: int, c: Context, b: memoryview) -> Request:
    return Interrupt(u, n, c, _unpack(abi.INTERRUPT_IN, b, u)[0])


def _notify_reply(u: int, n: int, c: Context, b: memoryview) -> Request:
    # The kernel sends NOTIFY_REPLY expecting no reply, so a malformed one
    # is an error with unique 0: nothing is written back for it.
    _, offset, size, _, _, _ = _unpack(abi.NOTIFY_RETRIEVE_IN, b, 0)
    data = b[abi.NOTIFY_RETRIEVE_IN.size :]
    if len(data) != size:
        raise ProtocolError(f"NOTIFY_REPLY of {size} bytes but {len(data)} follow")
    return NotifyReply(u, n, c, offset, data)


def _bmap(u: int, n: int, c: Context, b: memoryview) -> Request:
    block, blocksize, _ = _unpack(abi.BMAP_IN, b, u)
    return Bmap(u, n, c, block, blocksize)


def _ioctl(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, flags, cmd, arg, in_size, out_size = _unpack(abi.IOCTL_IN, b, u)
    data = b[abi.IOCTL_IN.size :]
    if len(data) != in_size:
        raise ProtocolError(f"IOCTL in_size {in_size} but {len(data)} bytes follow", unique=u)
    return Ioctl(u, n, c, fh, flags, cmd, arg, data, out_size)


def _poll(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, kh, flags, events = _unpack(abi.POLL_IN, b, u)
    return Poll(u, n, c, fh, kh, flags, events)


def _fallocate(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, offset, length, mode, _ = _unpack(abi.FALLOCATE_IN, b, u)
    return Fallocate(u, n, c, fh, offset, length, mode)


def _lseek(u: int, n: int, c: Context, b: memoryview) -> Request:
    fh, offset, whence, _ = _unpack(abi.LSEEK_IN, b, u)
    return Lseek(u, n, c, fh, offset, whence)


def _copy_file_range(u: int, n: int, c: Context, b: memoryview) -> Request:
    return CopyFileRange(u, n, c, *_unpack(abi.COPY_FILE_RANGE_IN, b, u))


def _init(u: int, n: int, c: Context, b: memoryview) -> Request:
    major, minor, readahead, flags = _unpack(abi.INIT_IN_COMPAT, b, u)
    flags2 = 0
    if flags & abi.InitFlag.INIT_EXT and len(b) >= abi.INIT_IN.size:
        flags2 = abi.INIT_IN.unpack_from(b)[4]
    return Init(u, n, c, major, minor, readahead, flags | flags2 << 32)


O = abi.Opcode


#: The opcode -> decoder table.
DECODERS: dict[int, Decoder] = {
    O.INIT: _init,
    O.DESTROY: _empty(Destroy),
    O.LOOKUP: _lookup,
    O.FORGET: _forget,
    O.BATCH_FORGET: _batch_forget,
    O.GETATTR: _getattr,
    O.SETATTR: _setattr,
    O.READLINK: _empty(Readlink),
    O.SYMLINK: _symlink,
    O.MKNOD: _mknod,
    O.MKDIR: _mkdir,
    O.UNLINK: _unlink,
    O.RMDIR: _rmdir,
    O.RENAME: _rename,
    O.RENAME2: _rename2,
    O.LINK: _link,
    O.OPEN: _open,
    O.CREATE: _create,
    O.READ: _read,
    O.WRITE: _write,
    O.STATFS: _empty(Statfs),
    O.RELEASE: _release,
    O.FLUSH: _flush,
    O.FSYNC: _fsync,
    O.SETXATTR: _setxattr,
    O.GETXATTR: _getxattr,
    O.LISTXATTR: _listxattr,
    O.REMOVEXATTR: _removexattr,
    O.OPENDIR: _opendir,
    O.READDIR: _readdir(False),
    O.READDIRPLUS: _readdir(True),
    O.RELEASEDIR: _releasedir,
    O.FSYNCDIR: _fsyncdir,
    O.GETLK: _lock(O.GETLK),
    O.SETLK: _lock(O.SETLK),
    O.SETLKW: _lock(O.SETLKW),
    O.ACCESS: _access,
    O.INTERRUPT: _interrupt,
    O.BMAP: _bmap,
    O.NOTIFY_REPLY: _notify_reply,
    O.IOCTL: _ioctl,
    O.POLL: _poll,
    O.FALLOCATE: _fallocate,
    O.LSEEK: _lseek,
    O.COPY_FILE_RANGE: _copy_file_range,
}



_IOCTL_COMMAND = struct.Struct("<I")
_IOCTL_COMMAND_AT = abi.IN_HEADER.size + 12  # fuse_ioctl_in: fh (8), flags (4), then cmd
_OPCODE_AT = 4  # fuse_in_header: len (4), then opcode
_IOCTL = int(abi.Opcode.IOCTL)  # a plain int: an enum member's lookup costs more than the rest


def ioctl_command(message: memoryview) -> int | None:
    """The command of an IOCTL request, read without decoding the message
    (None: another request, or one too short to be an IOCTL)."""
    if len(message) < abi.IN_HEADER.size + abi.IOCTL_IN.size or \
            _IOCTL_COMMAND.unpack_from(message, _OPCODE_AT)[0] != _IOCTL:
        return None
    command: int = _IOCTL_COMMAND.unpack_from(message, _IOCTL_COMMAND_AT)[0]
    return command


def decode(data: bytes | bytearray | memoryview, table: dict[int, Decoder] = DECODERS) -> Request:
    """Decode one message read from /dev/fuse. Raises ProtocolError when the
    message is malformed; its ``unique`` is set when the header was readable."""
    view = memoryview(data)
    if len(view) < abi.IN_HEADER.size:
        raise ProtocolError(f"message of {len(view)} bytes is shorter than a header")
    length, opcode, unique, nodeid, uid, gid, pid, extlen, _ = abi.IN_HEADER.unpack_from(view)
    if length != len(view):
        raise ProtocolError(f"header says {length} bytes, read {len(view)}", unique=unique)
    end = length - extlen * 8
    if end < abi.IN_HEADER.size:
        raise ProtocolError("extension area larger than the message", unique=unique)
    body = view[abi.IN_HEADER.size : end]
    ctx = Context(uid, gid, pid)
    decoder = table.get(opcode)
    if decoder is None:
        return Unsupported(unique, nodeid, ctx, opcode)
    return decoder(unique, nodeid, ctx, body)
