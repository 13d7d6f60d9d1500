# The operations contract between the FUSE session and a filesystem, after
# pyfuse3 and libfuse's fuse_lowlevel.h: one method per FUSE operation,
# named after it, taking the decoded request record and returning the one
# reply type the kernel accepts for it (so mypy checks that a filesystem
# answers as the kernel expects). A handler reports failure only by
# raising FUSEError(errno); the kernel passes any errno from 1 to 511 to
# the caller, except ENOSYS, which some operations read as "not
# implemented" (ENOSYS_MEANS; fs/fuse/*.c of Linux). Every default here
# answers ENOSYS.
#
# Lookup counts: each successful LOOKUP, MKNOD, MKDIR, SYMLINK, LINK and
# CREATE, and each entry of READDIRPLUS but "." and "..", adds one to the
# kernel's count of references to the node it names; FORGET (and each item
# of BATCH_FORGET) takes ``nlookup`` off. A node id stays valid while its
# count is above 0.
from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import NoReturn

from ipufs.fuse import requests as rq
from ipufs.fuse import replies as rp
from ipufs.fuse.errors import FUSEError


@dataclass(frozen=True, slots=True)
class Negotiated:
    """What INIT settled: the protocol minor, the flags both sides agreed
    on, and the largest WRITE the kernel will send."""

    minor: int
    flags: int
    max_write: int
    max_readahead: int

    @property
    def passthrough(self) -> bool:
        from ipufs.fuse.abi import InitFlag

        return bool(self.flags & InitFlag.PASSTHROUGH)


#: What the kernel does when an operation answers ENOSYS, for the
#: operations where ENOSYS is not simply the caller's error. "Remembered":
#: the kernel never sends that request again on this connection.
ENOSYS_MEANS: dict[type[rq.Request], str] = {
    rq.Access: "success, remembered: the kernel checks permissions itself (default_permissions)",
    rq.Bmap: "block 0, remembered",
    rq.CopyFileRange: "EOPNOTSUPP, remembered: the kernel copies through read and write instead",
    rq.Create: "remembered: the kernel sends MKNOD then OPEN instead",
    rq.Fallocate: "EOPNOTSUPP to the caller, remembered",
    rq.Flush: "success, remembered: no close(2) ever waits on the daemon",
    rq.Fsync: "success, remembered",
    rq.Fsyncdir: "success, remembered",
    rq.Getxattr: "EOPNOTSUPP to the caller, remembered",
    rq.Ioctl: "ENOTTY to the caller",
    rq.Listxattr: "EOPNOTSUPP to the caller, remembered",
    rq.Lseek: "remembered: the kernel seeks itself (SEEK_DATA/SEEK_HOLE as for a file without holes)",
    rq.Poll: "remembered: the file is always ready for reading and writing",
    rq.Removexattr: "EOPNOTSUPP to the caller, remembered",
    rq.Setxattr: "EOPNOTSUPP to the caller, remembered",
}


class Operations:
    """Base class of a filesystem served by :class:`ipufs.fuse.session.Session`.

    Each method's docstring states the kernel's contract: what the request
    asks, what the reply means, the errnos with a meaning of their own."""

    def init(self, negotiated: Negotiated) -> None:
        """The connection is up; ``negotiated`` says on what terms."""

    def destroy(self) -> None:
        """The kernel is tearing the connection down (unmount)."""

    def forget(self, nodeid: int, nlookup: int) -> None:
        """The kernel dropped ``nlookup`` references to ``nodeid`` (FORGET and
        each item of BATCH_FORGET). No reply is sent."""

    def interrupt(self, target: int) -> None:
        """The caller of request ``target`` was interrupted by a signal. No
        reply is sent; a handler still running may fail with EINTR."""

    def reply_may_wait(self, req: rq.Request) -> bool:
        """Whether the reply to ``req`` may be held back until notifications
        queued before it are written (so that the caller sees the page
        cache they update). Never while the kernel holds page locks for
        the request: a READ filling pages, a WRITE of cached pages (a
        buffered write, writeback), for a store notification of those pages
        waits on the very locks. Default: every request but READ and WRITE;
        a filesystem that knows a file is opened FOPEN_DIRECT_IO may say
        yes for its WRITEs."""
        return not isinstance(req, (rq.Read, rq.Write))

    def notify_reply(self, req: rq.NotifyReply) -> list[int]:
        """The kernel answered a FUSE_NOTIFY_RETRIEVE this filesystem sent
        (``req.unique`` is its notify_unique; ``req.data`` the cached bytes
        from ``req.offset``, up to the first page not cached). No reply is
        sent. Returns the uniques of postponed requests that may now be
        handled again (errors.Postponed)."""
        return []

    def _enosys(self) -> NoReturn:
        raise FUSEError(errno.ENOSYS)

    # --- names ------------------------------------------------------------------
    def lookup(self, req: rq.Lookup) -> rp.Entry:
        """Resolve ``req.name`` in directory ``req.nodeid``. An Entry adds
        one to the node's lookup count. ENOENT: no such name (the kernel
        caches the miss for the entry timeout of a negative entry only);
        ENOTDIR: ``req.nodeid`` is not a directory."""
        self._enosys()

    def getattr(self, req: rq.Getattr) -> rp.AttrReply:
        """Attributes of ``req.nodeid`` (``req.fh`` set when asked through an
        open file, as fstat(2) does); the kernel caches them for the
        reply's timeout. ENOENT: the node is gone."""
        self._enosys()

    def setattr(self, req: rq.Setattr) -> rp.AttrReply:
        """chmod, chown, truncate, utimes: change what ``req.valid`` names
        and answer the attributes in force. With default_permissions the
        kernel has already checked the caller's right to."""
        self._enosys()

    def readlink(self, req: rq.Readlink) -> rp.Data:
        """The target of symbolic link ``req.nodeid``. EINVAL: not a link."""
        self._enosys()

    def symlink(self, req: rq.Symlink) -> rp.Entry:
        """Make a symbolic link; an Entry adds one to its lookup count.
        EEXIST: the name is taken."""
        self._enosys()

    def mknod(self, req: rq.Mknod) -> rp.Entry:
        """Make a node (also CREATE's fallback); an Entry adds one to its
        lookup count. EEXIST: the name is taken."""
        self._enosys()

    def mkdir(self, req: rq.Mkdir) -> rp.Entry:
        """Make a directory; an Entry adds one to its lookup count."""
        self._enosys()

    def unlink(self, req: rq.Unlink) -> rp.Empty:
        """Remove a name (the node lives on while looked up or open).
        ENOENT: no such name; EISDIR: a directory."""
        self._enosys()

    def rmdir(self, req: rq.Rmdir) -> rp.Empty:
        """Remove an empty directory. ENOTEMPTY: it is not empty."""
        self._enosys()

    def rename(self, req: rq.Rename) -> rp.Empty:
        """Rename (RENAME and RENAME2; ``req.flags``: RENAME_NOREPLACE,
        RENAME_EXCHANGE). EINVAL for flags the filesystem does not take."""
        self._enosys()

    def link(self, req: rq.Link) -> rp.Entry:
        """Make a hard link; an Entry adds one to the node's lookup count."""
        self._enosys()

    # --- files ------------------------------------------------------------------
    def open(self, req: rq.Open) -> rp.Opened:
        """Open ``req.nodeid`` with open(2) flags ``req.flags``: a file
        handle, FOPEN_* flags (DIRECT_IO, KEEP_CACHE, PASSTHROUGH with a
        backing id...). Every Opened is matched by one RELEASE. ENOSYS is
        the caller's error unless FUSE_NO_OPEN_SUPPORT was negotiated."""
        self._enosys()

    def create(self, req: rq.Create) -> rp.Created:
        """Make and open a file at once (open(2) with O_CREAT): an Entry,
        adding one to the lookup count, and an Opened, matched by one
        RELEASE."""
        self._enosys()

    def read(self, req: rq.Read) -> rp.Data:
        """Up to ``req.size`` bytes at ``req.offset``. Fewer means end of
        file, except with FOPEN_DIRECT_IO, where the caller gets the short
        read as it is."""
        self._enosys()

    def write(self, req: rq.Write) -> rp.Written:
        """Write ``req.data`` at ``req.offset``: the count written (more
        than was sent is EIO to the caller). EFBIG, ENOSPC, EPERM: as
        write(2) would fail."""
        self._enosys()

    def statfs(self, req: rq.Statfs) -> rp.StatfsReply:
        """statfs(2) of the filesystem."""
        self._enosys()

    def release(self, req: rq.Release) -> rp.Empty:
        """The last reference to an open file went (after its last close or
        munmap); ``req.fh`` is not used again. Its error is ignored."""
        self._enosys()

    def flush(self, req: rq.Flush) -> rp.Empty:
        """close(2) of a descriptor of ``req.fh`` (once per close, so maybe
        several times per open). Its error is close(2)'s."""
        self._enosys()

    def fsync(self, req: rq.Fsync) -> rp.Empty:
        """fsync(2)/fdatasync(2) (``req.datasync``) of an open file."""
        self._enosys()

    # --- extended attributes ----------------------------------------------------
    def setxattr(self, req: rq.Setxattr) -> rp.Empty:
        """Set an attribute (``req.flags``: XATTR_CREATE, XATTR_REPLACE).
        EEXIST, ENODATA: as those flags demand; EPERM, EOPNOTSUPP."""
        self._enosys()

    def getxattr(self, req: rq.Getxattr) -> rp.Data | rp.XattrSize:
        """An attribute's value: with ``req.size`` 0, only its size
        (XattrSize); else the value (Data), or ERANGE when it is larger
        than ``req.size``. ENODATA: no such attribute."""
        self._enosys()

    def listxattr(self, req: rq.Listxattr) -> rp.Data | rp.XattrSize:
        """The attribute names, each NUL-terminated: with ``req.size`` 0,
        only their size (XattrSize); else the names (Data), or ERANGE."""
        self._enosys()

    def removexattr(self, req: rq.Removexattr) -> rp.Empty:
        """Remove an attribute. ENODATA: no such attribute."""
        self._enosys()

    # --- directories ------------------------------------------------------------
    def opendir(self, req: rq.Opendir) -> rp.Opened:
        """Open a directory: a handle for READDIR, matched by one
        RELEASEDIR. ENOTDIR: not a directory."""
        self._enosys()

    def readdir(self, req: rq.Readdir) -> rp.Data:
        """Entries from ``req.offset`` (the offset of an entry is where the
        next begins), encoded to fit ``req.size``; none means the end. With
        ``req.plus`` (READDIRPLUS) each entry carries its Entry, and each
        but "." and ".." adds one to the node's lookup count."""
        self._enosys()

    def releasedir(self, req: rq.Releasedir) -> rp.Empty:
        """A directory handle is closed for good. Its error is ignored."""
        self._enosys()

    def fsyncdir(self, req: rq.Fsyncdir) -> rp.Empty:
        """fsync(2) of a directory."""
        self._enosys()

    # --- the rest ---------------------------------------------------------------
    def lock(self, req: rq.Lock) -> rp.LockReply | rp.Empty:
        """POSIX locks (GETLK: the conflicting lock as a LockReply; SETLK,
        SETLKW: Empty, or EAGAIN/EDEADLK). Sent only when the filesystem
        negotiated FUSE_POSIX_LOCKS; otherwise the kernel keeps locks itself."""
        self._enosys()

    def access(self, req: rq.Access) -> rp.Empty:
        """access(2) of ``req.nodeid`` with ``req.mask``: Empty to allow,
        EACCES to refuse."""
        self._enosys()

    def bmap(self, req: rq.Bmap) -> rp.BmapReply:
        """The device block holding a file block (FIBMAP; block devices)."""
        self._enosys()

    def ioctl(self, req: rq.Ioctl) -> rp.IoctlReply:
        """An ioctl on an open regular file ("restricted": the kernel copies
        ``_IOC_SIZE(cmd)`` bytes in and out itself). The result is the
        ioctl's return value; the data, at most ``req.out_size`` bytes, is
        copied back to the caller's argument. ENOTTY: no such ioctl."""
        self._enosys()

    def poll(self, req: rq.Poll) -> rp.PollReply:
        """The ready events among ``req.events``. With
        FUSE_POLL_SCHEDULE_NOTIFY in ``req.flags`` the kernel waits for a
        FUSE_NOTIFY_POLL naming ``req.kh`` before it asks again."""
        self._enosys()

    def fallocate(self, req: rq.Fallocate) -> rp.Empty:
        """fallocate(2) of an open file. EOPNOTSUPP: mode not supported."""
        self._enosys()

    def lseek(self, req: rq.Lseek) -> rp.LseekReply:
        """SEEK_DATA and SEEK_HOLE (the kernel seeks itself for the others).
        ENXIO: ``req.offset`` is at or past the end."""
        self._enosys()

    def copy_file_range(self, req: rq.CopyFileRange) -> rp.Written:
        """Copy between two open files of this filesystem: the count copied."""
        self._enosys()
