# The operations contract between the FUSE session and a filesystem, after
# pyfuse3: one method per FUSE operation, named after it, taking the decoded
# request record and returning a reply record. A handler reports failure
# only by raising FUSEError(errno). Every default answers ENOSYS, which the
# kernel remembers for the operations where ENOSYS means "never ask again".
from __future__ import annotations

import errno
from dataclasses import dataclass

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


class Operations:
    """Base class of a filesystem served by :class:`ipufs.fuse.session.Session`."""

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

    def _enosys(self) -> rp.Reply:
        raise FUSEError(errno.ENOSYS)

    def lookup(self, req: rq.Lookup) -> rp.Reply:
        """Resolve ``req.name`` in directory ``req.nodeid``: Entry or ENOENT."""
        return self._enosys()

    def getattr(self, req: rq.Getattr) -> rp.Reply:
        return self._enosys()

    def setattr(self, req: rq.Setattr) -> rp.Reply:
        return self._enosys()

    def readlink(self, req: rq.Readlink) -> rp.Reply:
        return self._enosys()

    def symlink(self, req: rq.Symlink) -> rp.Reply:
        return self._enosys()

    def mknod(self, req: rq.Mknod) -> rp.Reply:
        return self._enosys()

    def mkdir(self, req: rq.Mkdir) -> rp.Reply:
        return self._enosys()

    def unlink(self, req: rq.Unlink) -> rp.Reply:
        return self._enosys()

    def rmdir(self, req: rq.Rmdir) -> rp.Reply:
        return self._enosys()

    def rename(self, req: rq.Rename) -> rp.Reply:
        return self._enosys()

    def link(self, req: rq.Link) -> rp.Reply:
        return self._enosys()

    def open(self, req: rq.Open) -> rp.Reply:
        return self._enosys()

    def create(self, req: rq.Create) -> rp.Reply:
        return self._enosys()

    def read(self, req: rq.Read) -> rp.Reply:
        return self._enosys()

    def write(self, req: rq.Write) -> rp.Reply:
        return self._enosys()

    def statfs(self, req: rq.Statfs) -> rp.Reply:
        return self._enosys()

    def release(self, req: rq.Release) -> rp.Reply:
        return self._enosys()

    def flush(self, req: rq.Flush) -> rp.Reply:
        return self._enosys()

    def fsync(self, req: rq.Fsync) -> rp.Reply:
        return self._enosys()

    def setxattr(self, req: rq.Setxattr) -> rp.Reply:
        return self._enosys()

    def getxattr(self, req: rq.Getxattr) -> rp.Reply:
        return self._enosys()

    def listxattr(self, req: rq.Listxattr) -> rp.Reply:
        return self._enosys()

    def removexattr(self, req: rq.Removexattr) -> rp.Reply:
        return self._enosys()

    def opendir(self, req: rq.Opendir) -> rp.Reply:
        return self._enosys()

    def readdir(self, req: rq.Readdir) -> rp.Reply:
        return self._enosys()

    def releasedir(self, req: rq.Releasedir) -> rp.Reply:
        return self._enosys()

    def fsyncdir(self, req: rq.Fsyncdir) -> rp.Reply:
        return self._enosys()

    def lock(self, req: rq.Lock) -> rp.Reply:
        return self._enosys()

    def access(self, req: rq.Access) -> rp.Reply:
        return self._enosys()

    def bmap(self, req: rq.Bmap) -> rp.Reply:
        return self._enosys()

    def ioctl(self, req: rq.Ioctl) -> rp.Reply:
        return self._enosys()

    def poll(self, req: rq.Poll) -> rp.Reply:
        return self._enosys()

    def fallocate(self, req: rq.Fallocate) -> rp.Reply:
        return self._enosys()

    def lseek(self, req: rq.Lseek) -> rp.Reply:
        return self._enosys()

    def copy_file_range(self, req: rq.CopyFileRange) -> rp.Reply:
        return self._enosys()
