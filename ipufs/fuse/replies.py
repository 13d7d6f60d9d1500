# FUSE replies as records (immutable to mypy, ipufs/fuse/record.py), each
# able to encode its payload (linux/fuse.h, protocol 7.40). Pure: records
# in, bytes out.
from __future__ import annotations

import stat as _stat
from collections.abc import Iterable

from ipufs.fuse import abi
from ipufs.fuse.record import record

_NS = 1_000_000_000


@record
class Attr:
    """struct fuse_attr; times in nanoseconds since the epoch."""

    ino: int
    mode: int
    size: int = 0
    nlink: int = 1
    uid: int = 0
    gid: int = 0
    rdev: int = 0
    atime_ns: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    blksize: int = 4096
    blocks: int = 0
    flags: int = 0

    def encode(self) -> bytes:
        return abi.ATTR.pack(
            self.ino, self.size, self.blocks,
            self.atime_ns // _NS, self.mtime_ns // _NS, self.ctime_ns // _NS,
            self.atime_ns % _NS, self.mtime_ns % _NS, self.ctime_ns % _NS,
            self.mode, self.nlink, self.uid, self.gid, self.rdev, self.blksize, self.flags,
        )


def _split(seconds: float) -> tuple[int, int]:
    whole = int(seconds)
    return whole, int((seconds - whole) * _NS)


class Reply:
    """Base of every reply record: ``encode()`` gives the payload that
    follows the fuse_out_header."""

    __slots__ = ()

    def encode(self) -> bytes:
        raise NotImplementedError


@record
class Empty(Reply):
    """A success with no payload (FLUSH, RELEASE, FSYNC, ACCESS...)."""

    def encode(self) -> bytes:
        return b""


@record
class Entry(Reply):
    """fuse_entry_out, the answer to LOOKUP (and MKNOD, MKDIR...)."""

    attr: Attr
    generation: int = 0
    entry_timeout: float = 1.0
    attr_timeout: float = 1.0

    def encode(self) -> bytes:
        es, ens = _split(self.entry_timeout)
        as_, ans = _split(self.attr_timeout)
        return (
            abi.ENTRY_OUT_HEAD.pack(self.attr.ino, self.generation, es, as_, ens, ans)
            + self.attr.encode()
        )


@record
class AttrReply(Reply):
    """fuse_attr_out, the answer to GETATTR and SETATTR."""

    attr: Attr
    timeout: float = 1.0

    def encode(self) -> bytes:
        s, ns = _split(self.timeout)
        return abi.ATTR_OUT_HEAD.pack(s, ns, 0) + self.attr.encode()


@record
class Opened(Reply):
    """fuse_open_out: a file handle, FOPEN_* flags, and the backing id of a
    passthrough file (0 when none)."""

    fh: int
    flags: int = 0
    backing_id: int = 0

    def encode(self) -> bytes:
        return abi.OPEN_OUT.pack(self.fh, self.flags, self.backing_id)


@record
class Created(Reply):
    """fuse_entry_out then fuse_open_out: the answer to CREATE, which makes
    a node (one more lookup of it) and opens it."""

    entry: Entry
    opened: Opened

    def encode(self) -> bytes:
        return self.entry.encode() + self.opened.encode()


@record
class Data(Reply):
    """Raw bytes: READ, READDIR, READLINK, GETXATTR/LISTXATTR values."""

    data: bytes | bytearray | memoryview

    def encode(self) -> bytes:
        return bytes(self.data)


@record
class Written(Reply):
    size: int

    def encode(self) -> bytes:
        return abi.WRITE_OUT.pack(self.size, 0)


@record
class XattrSize(Reply):
    """fuse_getxattr_out: the size a value or list would need (a GETXATTR or
    LISTXATTR with size 0 asks only for this)."""

    size: int

    def encode(self) -> bytes:
        return abi.GETXATTR_OUT.pack(self.size, 0)


@record
class StatfsReply(Reply):
    blocks: int = 0
    bfree: int = 0
    bavail: int = 0
    files: int = 0
    ffree: int = 0
    bsize: int = 4096
    namelen: int = 255
    frsize: int = 4096

    def encode(self) -> bytes:
        return abi.KSTATFS.pack(
            self.blocks, self.bfree, self.bavail, self.files, self.ffree,
            self.bsize, self.namelen, self.frsize, 0,
        )


@record
class IoctlReply(Reply):
    """fuse_ioctl_out followed by the bytes the kernel copies back to the
    caller's argument (at most the request's out_size)."""

    result: int = 0
    data: bytes = b""

    def encode(self) -> bytes:
        return abi.IOCTL_OUT.pack(self.result, 0, 0, 0) + self.data


@record
class PollReply(Reply):
    revents: int

    def encode(self) -> bytes:
        return abi.POLL_OUT.pack(self.revents, 0)


@record
class LseekReply(Reply):
    offset: int

    def encode(self) -> bytes:
        return abi.LSEEK_OUT.pack(self.offset)


@record
class LockReply(Reply):
    start: int
    end: int
    type: int
    pid: int

    def encode(self) -> bytes:
        return abi.LK_OUT.pack(self.start, self.end, self.type, self.pid)


@record
class BmapReply(Reply):
    """fuse_bmap_out: the device block of a file block."""

    block: int

    def encode(self) -> bytes:
        return abi.BMAP_OUT.pack(self.block)


@record
class InitReply(Reply):
    major: int
    minor: int
    max_readahead: int
    flags: int
    max_background: int = 0
    congestion_threshold: int = 0
    max_write: int = 0
    time_gran: int = 1
    max_pages: int = 0
    max_stack_depth: int = 0

    def encode(self) -> bytes:
        return abi.INIT_OUT.pack(
            self.major, self.minor, self.max_readahead, self.flags & 0xFFFFFFFF,
            self.max_background, self.congestion_threshold, self.max_write,
            self.time_gran, self.max_pages, 0, self.flags >> 32, self.max_stack_depth,
        )


@record
class DirEntry:
    """One directory entry; ``offset`` is the cookie of the entry after it."""

    ino: int
    name: bytes
    mode: int
    offset: int

    @property
    def dtype(self) -> int:
        return _stat.S_IFMT(self.mode) >> 12


def encode_dirents(entries: Iterable[DirEntry], size: int) -> bytes:
    """Pack fuse_dirent records until the next would pass ``size`` bytes."""
    out = bytearray()
    for e in entries:
        rec = abi.dirent_size(len(e.name))
        if len(out) + rec > size:
            break
        out += abi.DIRENT_HEAD.pack(e.ino, e.offset, len(e.name), e.dtype)
        out += e.name
        out += bytes(rec - abi.DIRENT_HEAD.size - len(e.name))
    return bytes(out)


def encode_direntplus(entries: Iterable[tuple[DirEntry, Entry]], size: int) -> bytes:
    """Pack fuse_direntplus records (an entry_out before each dirent)."""
    out = bytearray()
    for e, entry in entries:
        rec = abi.dirent_size(len(e.name), plus=True)
        if len(out) + rec > size:
            break
        head = entry.encode() + abi.DIRENT_HEAD.pack(e.ino, e.offset, len(e.name), e.dtype)
        out += head + e.name + bytes(rec - len(head) - len(e.name))
    return bytes(out)


def frame(unique: int, payload: bytes = b"", error: int = 0) -> bytes:
    """A whole reply message: fuse_out_header then payload. ``error`` is a
    positive errno; the kernel receives it negated."""
    return abi.OUT_HEADER.pack(abi.OUT_HEADER.size + len(payload), -error, unique) + payload


def notification(code: abi.NotifyCode, payload: bytes) -> bytes:
    """An unsolicited message to the kernel: unique 0, error = the code."""
    return abi.OUT_HEADER.pack(abi.OUT_HEADER.size + len(payload), code, 0) + payload


def notify_poll_wakeup(kh: int) -> bytes:
    return notification(abi.NotifyCode.POLL, abi.NOTIFY_POLL_WAKEUP.pack(kh))


def notify_inval_inode(ino: int, offset: int = 0, length: int = 0) -> bytes:
    """Drop cached pages of ``ino`` in [offset, offset+length); length 0
    means to the end, a negative offset drops only the attributes."""
    return notification(abi.NotifyCode.INVAL_INODE, abi.NOTIFY_INVAL_INODE.pack(ino, offset, length))


def notify_store(ino: int, offset: int, data: bytes | memoryview) -> bytes:
    """Put ``data`` into the kernel's page cache of ``ino`` at ``offset``."""
    return notification(
        abi.NotifyCode.STORE, abi.NOTIFY_STORE.pack(ino, offset, len(data), 0) + bytes(data)
    )


def notify_retrieve(notify_unique: int, ino: int, offset: int, size: int) -> bytes:
    """Ask the kernel for what its page cache of ``ino`` holds in
    [offset, offset+size): it answers with a NOTIFY_REPLY request carrying
    ``notify_unique`` and the bytes of the cached pages from ``offset`` up
    to the first page it does not hold (none, when the first is missing).
    The kernel takes no page lock for it, so any thread may send it."""
    return notification(abi.NotifyCode.RETRIEVE, abi.NOTIFY_RETRIEVE.pack(notify_unique, ino, offset, size, 0))
