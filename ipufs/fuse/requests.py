# FUSE requests as slotted records (immutable to mypy, ipufs/fuse/record.py),
# one per request of linux/fuse.h (protocol 7.40), named after its opcode.
# ipufs/fuse/decoding.py turns the bytes read from /dev/fuse into them.
from __future__ import annotations

import re
from typing import ClassVar

from ipufs.fuse.record import record


@record
class Context:
    """Who asked: the caller's ids, from the request header. The pid is as
    seen from the PID namespace of the process that mounted."""

    uid: int
    gid: int
    pid: int


@record
class Request:
    #: The Operations method that serves this request, named after its
    #: opcode (set for every request below; None: the session itself
    #: answers it, or nothing does).
    operation: ClassVar[str | None] = None

    unique: int
    nodeid: int
    ctx: Context


@record
class Init(Request):
    major: int
    minor: int
    max_readahead: int
    flags: int  # flags | flags2 << 32


@record
class Destroy(Request):
    pass


@record
class Lookup(Request):
    name: bytes


@record
class Forget(Request):
    nlookup: int


@record
class BatchForget(Request):
    forgets: tuple[tuple[int, int], ...]  # (nodeid, nlookup)


@record
class Getattr(Request):
    fh: int | None


@record
class Setattr(Request):
    valid: int
    fh: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    mode: int
    uid: int
    gid: int


@record
class Readlink(Request):
    pass


@record
class Symlink(Request):
    name: bytes
    target: bytes


@record
class Mknod(Request):
    name: bytes
    mode: int
    rdev: int
    umask: int


@record
class Mkdir(Request):
    name: bytes
    mode: int
    umask: int


@record
class Unlink(Request):
    name: bytes


@record
class Rmdir(Request):
    name: bytes


@record
class Rename(Request):
    name: bytes
    newdir: int
    newname: bytes
    flags: int


@record
class Link(Request):
    oldnodeid: int
    name: bytes


@record
class Open(Request):
    flags: int


@record
class Create(Request):
    name: bytes
    flags: int
    mode: int
    umask: int


@record
class Read(Request):
    fh: int
    offset: int
    size: int
    flags: int


@record
class Write(Request):
    fh: int
    offset: int
    data: memoryview
    write_flags: int
    flags: int


@record
class Statfs(Request):
    pass


@record
class Release(Request):
    fh: int
    flags: int
    release_flags: int


@record
class Flush(Request):
    fh: int
    lock_owner: int


@record
class Fsync(Request):
    fh: int
    datasync: bool


@record
class Setxattr(Request):
    name: bytes
    value: bytes
    flags: int


@record
class Getxattr(Request):
    name: bytes
    size: int


@record
class Listxattr(Request):
    size: int


@record
class Removexattr(Request):
    name: bytes


@record
class Opendir(Request):
    flags: int


@record
class Readdir(Request):
    fh: int
    offset: int
    size: int
    plus: bool


@record
class Releasedir(Request):
    fh: int


@record
class Fsyncdir(Request):
    fh: int
    datasync: bool


@record
class Lock(Request):
    """GETLK, SETLK and SETLKW, told apart by ``opcode``."""

    opcode: int
    fh: int
    owner: int
    start: int
    end: int
    type: int
    pid: int
    lk_flags: int


@record
class Access(Request):
    mask: int


@record
class Interrupt(Request):
    target: int  # the unique id of the request to interrupt


@record
class NotifyReply(Request):
    """The kernel's answer to a FUSE_NOTIFY_RETRIEVE (``unique`` is the
    notification's notify_unique): the cached bytes of ``nodeid`` from
    ``offset``. Takes no reply."""

    offset: int
    data: memoryview


@record
class Bmap(Request):
    block: int
    blocksize: int


@record
class Ioctl(Request):
    fh: int
    flags: int
    cmd: int
    arg: int
    in_data: memoryview
    out_size: int


@record
class Poll(Request):
    fh: int
    kh: int
    flags: int
    events: int


@record
class Fallocate(Request):
    fh: int
    offset: int
    length: int
    mode: int


@record
class Lseek(Request):
    fh: int
    offset: int
    whence: int


@record
class CopyFileRange(Request):
    fh_in: int
    off_in: int
    nodeid_out: int
    fh_out: int
    off_out: int
    length: int
    flags: int


@record
class Unsupported(Request):
    """Any opcode ipufs does not decode (SETUPMAPPING, TMPFILE, STATX, an
    opcode from a newer kernel...). The session answers it with ENOSYS."""

    opcode: int


#: Requests the session answers itself: negotiation, teardown, and those
#: that take no reply.
SESSION_REQUESTS: tuple[type[Request], ...] = (Init, Destroy, Forget, BatchForget, Interrupt, NotifyReply)


def _operation_name(cls: type[Request]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


#: Every request an Operations method serves, each naming its method
#: (CopyFileRange -> copy_file_range). A record class defined above is
#: served unless the session answers it or it is Unsupported: no request
#: can be left out of the dispatch table by omission.
OPERATIONS: tuple[type[Request], ...] = tuple(
    cls for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, Request) and cls is not Request
    and cls not in SESSION_REQUESTS and cls is not Unsupported
)
for _cls in OPERATIONS:
    _cls.operation = _operation_name(_cls)
