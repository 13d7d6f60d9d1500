# The ipufs filesystem: the Operations of the node tree, a router. It
# serves the tree itself (lookups, listings, the root, the refusals of a
# fixed tree; the inodes' attributes, which chmod, chown and touch change,
# are attributes.py's) and hands every other request to the side its
# inode or file handle belongs to: the device nodes (device_nodes.py) or
# the sysfs view (view_files.py, docs/sysfs.md). The tree is fixed: anything that would create, remove,
# rename or resize a node fails with EPERM (docs/filesystem.md has the
# whole table, checked against ipufs/fuse/operations.py's contract).
from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from ipufs.driver import sysfs, xattrs
from ipufs.driver.attributes import TreeAttributes
from ipufs.driver.device_nodes import POLL_READY, DeviceNodes
from ipufs.driver.devices import DeviceSet
from ipufs.driver.mapping import BarMapping
from ipufs.driver.nodes import ROOT_INO, Node, NodeTree, Ownership
from ipufs.driver.view_files import SysfsView
from ipufs.fuse import abi, decoding
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError
from ipufs.fuse.operations import Negotiated, Operations

#: The longest name statfs reports (f_namemax); the kernel passes longer
#: ones on, and they get ENAMETOOLONG as on any filesystem.
NAME_MAX = 255


@dataclass
class Stats:
    lookups: dict[int, int] = field(default_factory=dict)  # nodeid -> lookups the kernel holds


class IpuFilesystem(Operations):
    """The node tree (built whole, the view included, by its maker) as FUSE
    operations: the tree's own, and the rest routed to ``nodes`` or
    ``view``."""

    def __init__(self, devices: DeviceSet, tree: NodeTree, *, nodes: DeviceNodes, view: SysfsView,
                 mapping: BarMapping, ownership: Ownership, control_path: str,
                 transport: Callable[[], str] = lambda: "/dev/fuse",
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.devices = devices
        self.tree = tree
        self.nodes = nodes
        self.view = view
        self.mapping = mapping
        self.ownership = ownership
        #: The control socket, named in the root's user.ipufs.control.
        self.control_path = control_path
        #: How requests reach the daemon, and why (user.ipufs.transport).
        self.transport = transport
        #: Open device files, by file handle (the driver's table; read on
        #: every request, so the router keeps its own reference).
        self.files = nodes.files
        self.stats = Stats()
        self._next_fh = 1
        #: Owner, group, mode and times of every inode, and their sizes.
        self.attributes = TreeAttributes(tree, nodes=nodes, view=view, ownership=ownership, clock=clock)
        self.attr = self.attributes.attr
        self._state = self.attributes.state

    @property
    def mode(self) -> str:
        """How BARs are served: mapping.PASSTHROUGH or mapping.PAGE_CACHE."""
        return self.mapping.settle()

    @property
    def mode_reason(self) -> str:
        return self.mapping.reason

    def init(self, negotiated: Negotiated) -> None:
        self.mapping.init(negotiated)

    def _new_fh(self) -> int:
        fh = self._next_fh
        self._next_fh += 1
        return fh

    # --- attributes -----------------------------------------------------
    def _node(self, ino: int) -> Node:
        node = self.tree.by_ino(ino)
        if node is None:
            raise FUSEError(errno.EISDIR if self.tree.is_directory(ino) else errno.ENOENT)
        return node

    def lookup(self, req: rq.Lookup) -> rp.Entry:
        if not self.tree.is_directory(req.nodeid):
            self._state(req.nodeid)
            raise FUSEError(errno.ENOTDIR)
        if len(req.name) > NAME_MAX:
            raise FUSEError(errno.ENAMETOOLONG)
        try:
            name = req.name.decode("ascii")
        except UnicodeDecodeError:
            raise FUSEError(errno.ENOENT) from None
        if name == "..":  # asked for after an export, never by path walks
            ino = self.tree.parent_of(req.nodeid)
        else:
            found = self.tree.lookup(req.nodeid, name)
            if found is None:
                raise FUSEError(errno.ENOENT)
            ino = found
        self.stats.lookups[ino] = self.stats.lookups.get(ino, 0) + 1
        return rp.Entry(self.attr(ino))

    def forget(self, nodeid: int, nlookup: int) -> None:
        left = self.stats.lookups.get(nodeid, 0) - nlookup
        if left > 0:
            self.stats.lookups[nodeid] = left
        else:
            self.stats.lookups.pop(nodeid, None)

    def getattr(self, req: rq.Getattr) -> rp.AttrReply:
        return rp.AttrReply(self.attr(req.nodeid))

    def setattr(self, req: rq.Setattr) -> rp.AttrReply:
        return rp.AttrReply(self.attributes.setattr(req))

    def statfs(self, req: rq.Statfs) -> rp.StatfsReply:
        total = sum(self.attr(n.ino).size for n in self.tree)
        return rp.StatfsReply(blocks=total // 4096, files=len(self.tree) + 1 + sum(1 for _ in self.tree.entries()))

    def access(self, req: rq.Access) -> rp.Empty:
        self._state(req.nodeid)
        return rp.Empty()

    # --- the fixed tree --------------------------------------------------
    def _fixed(self, req: rq.Request) -> NoReturn:
        raise FUSEError(errno.EPERM, "the ipufs tree is fixed")

    mknod = mkdir = symlink = unlink = rmdir = rename = link = create = _fixed

    def readlink(self, req: rq.Readlink) -> rp.Data:
        if self.tree.is_entry(req.nodeid):
            return self.view.readlink(self.tree.entry(req.nodeid))
        raise FUSEError(errno.EINVAL)

    def fallocate(self, req: rq.Fallocate) -> rp.Empty:
        raise FUSEError(errno.EOPNOTSUPP, "BARs have fixed, fully allocated sizes")

    # --- directory ----------------------------------------------------------
    def opendir(self, req: rq.Opendir) -> rp.Opened:
        if not self.tree.is_directory(req.nodeid):
            self._state(req.nodeid)
            raise FUSEError(errno.ENOTDIR)
        return rp.Opened(0, abi.OpenFlag.CACHE_DIR | abi.OpenFlag.KEEP_CACHE)

    def _dirents(self, ino: int) -> list[rp.DirEntry]:
        entries = [rp.DirEntry(ino, b".", stat.S_IFDIR, 1),
                   rp.DirEntry(self.tree.parent_of(ino), b"..", stat.S_IFDIR, 2)]
        if ino == ROOT_INO:
            for node in self.tree:
                entries.append(rp.DirEntry(node.ino, node.name.encode(), stat.S_IFREG, len(entries) + 1))
            children = self.tree.root_children
        else:
            children = self.tree.entry(ino).children or {}
        for name, child in children.items():
            kind = stat.S_IFMT(self._state(child).mode)
            entries.append(rp.DirEntry(child, name.encode(), kind, len(entries) + 1))
        return entries

    def readdir(self, req: rq.Readdir) -> rp.Data:
        if not self.tree.is_directory(req.nodeid):
            raise FUSEError(errno.ENOTDIR)
        entries = self._dirents(req.nodeid)[req.offset :]
        if req.plus:
            pairs = []
            for e in entries:
                if e.name not in (b".", b".."):
                    self.stats.lookups[e.ino] = self.stats.lookups.get(e.ino, 0) + 1
                    pairs.append((e, rp.Entry(self.attr(e.ino))))
                else:
                    pairs.append((e, rp.Entry(rp.Attr(ino=0, mode=0))))
            return rp.Data(rp.encode_direntplus(pairs, req.size))
        return rp.Data(rp.encode_dirents(entries, req.size))

    def releasedir(self, req: rq.Releasedir) -> rp.Empty:
        return rp.Empty()

    def fsyncdir(self, req: rq.Fsyncdir) -> rp.Empty:
        return rp.Empty()

    # --- files: routed by inode at open, by file handle after ------------
    def write(self, req: rq.Write) -> rp.Written:
        return self.nodes.write(req)  # the view's files are read-only: EBADF there

    def reply_may_wait(self, req: rq.Request) -> bool:
        return self.nodes.reply_may_wait(req)

    def notify_reply(self, req: rq.NotifyReply) -> list[int]:
        return self.nodes.notify_reply(req)

    def open(self, req: rq.Open) -> rp.Opened:
        if self.tree.is_entry(req.nodeid):
            return self.view.open(req, self._new_fh())
        node = self._node(req.nodeid)
        return self.nodes.open(req, node, self._new_fh())

    def read(self, req: rq.Read) -> rp.Data:
        f = self.files.get(req.fh)
        if f is None:
            return self.view.read(req)
        return self.nodes.read(req, f)

    def fsync(self, req: rq.Fsync) -> rp.Empty:
        if req.fh not in self.view and req.fh not in self.files:
            raise FUSEError(errno.EBADF)
        return rp.Empty()

    # FLUSH is never sent (every open answers FOPEN_NOFLUSH, see
    # mapping.BarMapping.open_flags); should a kernel send it anyway, the
    # default ENOSYS stops it for good. So no close(2) ever waits on the daemon.

    def release(self, req: rq.Release) -> rp.Empty:
        self.view.close(req.fh)
        f = self.files.get(req.fh)
        if f is not None:
            self.nodes.release(f, req.fh)
        return rp.Empty()

    def lseek(self, req: rq.Lseek) -> rp.LseekReply:
        """SEEK_DATA and SEEK_HOLE on a file without holes, as
        generic_file_llseek sees one: a BAR of its size, or a view
        attribute of sysfs's (4096), as on real sysfs."""
        if req.fh in self.view:
            size = sysfs.ATTRIBUTE_SIZE
        else:
            f = self.files.get(req.fh)
            if f is None:
                raise FUSEError(errno.EBADF)
            size = self.nodes.size(f.node)
        if req.offset >= size or req.offset < 0:
            raise FUSEError(errno.ENXIO)
        if req.whence == os.SEEK_DATA:
            return rp.LseekReply(req.offset)
        if req.whence == os.SEEK_HOLE:
            return rp.LseekReply(size)
        raise FUSEError(errno.EINVAL)

    def poll(self, req: rq.Poll) -> rp.PollReply:
        """BARs and the view's files are always ready; the mailbox is ready
        for reading while the ICU has responses (DeviceNodes.poll)."""
        if req.fh in self.view:
            return rp.PollReply(req.events & POLL_READY)
        f = self.files.get(req.fh)
        if f is None:
            raise FUSEError(errno.EBADF)
        return self.nodes.poll(req, f)

    def leaves_tiles(self, message: memoryview) -> bool:
        """Whether the request ``message`` (as read, not yet decoded) leaves
        running tiles running: an ioctl that does (DeviceNodes); the
        daemon's FUSE reader then takes its lock quietly."""
        cmd = decoding.ioctl_command(message)
        return cmd is not None and self.nodes.leaves_tiles(cmd)

    def ioctl(self, req: rq.Ioctl) -> rp.IoctlReply:
        f = self.files.get(req.fh)
        if f is None:
            if req.fh in self.view or self.tree.is_directory(req.nodeid):
                raise FUSEError(errno.ENOTTY, "only the device nodes take ioctls")
            raise FUSEError(errno.EBADF)
        return self.nodes.ioctl(req, f)

    # --- extended attributes: read-only facts about the mount -------------
    def xattrs(self, ino: int) -> dict[bytes, bytes]:
        if ino == ROOT_INO:
            return xattrs.of_root(self.devices, self.mapping, self.control_path, self.nodes.fast.state,
                                  self.transport())
        node = self.tree.by_ino(ino)
        if node is None:
            self._state(ino)
            return {}
        return xattrs.of_node(node, self.devices, self.mapping)

    def getxattr(self, req: rq.Getxattr) -> rp.Data | rp.XattrSize:
        value = self.xattrs(req.nodeid).get(req.name)
        if value is None:
            raise FUSEError(errno.ENODATA)
        return xattrs.sized(value, req.size)

    def listxattr(self, req: rq.Listxattr) -> rp.Data | rp.XattrSize:
        names = b"".join(name + b"\0" for name in self.xattrs(req.nodeid))
        return xattrs.sized(names, req.size)

    def setxattr(self, req: rq.Setxattr) -> rp.Empty:
        self._state(req.nodeid)
        raise FUSEError(errno.EPERM, "ipufs attributes are read-only")

    def removexattr(self, req: rq.Removexattr) -> rp.Empty:
        self._state(req.nodeid)
        raise FUSEError(errno.EPERM, "ipufs attributes are read-only")

