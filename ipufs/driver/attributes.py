# The attributes of the node tree's inodes, as stat and ls show them: the
# root's, the device nodes' (their owner, group and mode from the mount's
# Ownership, their size the BAR's, their blocks what the backing memory
# holds) and the sysfs view's (root's and read-only, as sysfs is; its
# times the mount's). chmod, chown and touch change the root's and the
# device nodes'; the view's and every size are fixed (docs/filesystem.md).
from __future__ import annotations

import errno
import stat
from collections.abc import Callable
from dataclasses import dataclass

from ipufs.driver.device_nodes import DeviceNodes
from ipufs.driver.nodes import ROOT_INO, Entry, Kind, NodeTree, Ownership
from ipufs.driver.view_files import SysfsView
from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError


@dataclass
class NodeState:
    """Per-node attributes that chmod, chown and touch may change."""

    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int


class TreeAttributes:
    """The attributes of every inode of ``tree``; sizes and blocks come
    from ``nodes`` and ``view``."""

    def __init__(self, tree: NodeTree, *, nodes: DeviceNodes, view: SysfsView, ownership: Ownership,
                 clock: Callable[[], int]) -> None:
        self.tree = tree
        self.nodes = nodes
        self.view = view
        self.clock = clock
        now = clock()
        self._root = NodeState(stat.S_IFDIR | 0o755, 0, 0, now, now, now)
        self._view = {kind: NodeState(mode, 0, 0, now, now, now) for kind, mode in (
            (Kind.DIRECTORY, stat.S_IFDIR | 0o755), (Kind.ATTRIBUTE, stat.S_IFREG | 0o444),
            (Kind.LINK, stat.S_IFLNK | 0o777))}
        o = ownership
        self._states = [NodeState(stat.S_IFREG | (o.mode & 0o7777), o.uid, o.gid, now, now, now)
                        for _ in range(len(tree))]

    def entry(self, ino: int) -> Entry:
        """An entry of the sysfs view (ENOENT: none)."""
        try:
            return self.tree.entry(ino)
        except KeyError:
            raise FUSEError(errno.ENOENT) from None

    def state(self, ino: int) -> NodeState:
        """What chmod, chown and touch change of ``ino`` (ENOENT: no such inode)."""
        if ino == ROOT_INO:
            return self._root
        node = self.tree.by_ino(ino)
        if node is None:
            return self._view[self.entry(ino).kind]
        return self._states[node.ino - ROOT_INO - 1]

    def attr(self, ino: int) -> rp.Attr:
        s = self.state(ino)
        node = self.tree.by_ino(ino)
        if node is None:
            nlink, size = (2, 0) if ino == ROOT_INO else self.view.nlink_and_size(self.entry(ino))
            return rp.Attr(ino=ino, mode=s.mode, nlink=nlink, size=size, uid=s.uid, gid=s.gid,
                           atime_ns=s.atime_ns, mtime_ns=s.mtime_ns, ctime_ns=s.ctime_ns)
        return rp.Attr(ino=ino, mode=s.mode, size=self.nodes.size(node), uid=s.uid, gid=s.gid,
                       atime_ns=s.atime_ns, mtime_ns=s.mtime_ns, ctime_ns=s.ctime_ns,
                       blocks=self.nodes.blocks(node))

    def setattr(self, req: rq.Setattr) -> rp.Attr:
        """chmod, chown, touch (and a truncate to the size a node has): the
        attributes after it."""
        # default_permissions: the kernel already refused callers without
        # the right to chmod, chown or touch this node.
        valid = abi.SetattrValid(req.valid)
        s = self.state(req.nodeid)
        if req.nodeid != ROOT_INO and self.tree.by_ino(req.nodeid) is None:
            raise FUSEError(errno.EPERM, "the sysfs view is read-only")
        if valid & abi.SetattrValid.SIZE:
            if req.nodeid == ROOT_INO or req.size != self.attr(req.nodeid).size:
                raise FUSEError(errno.EPERM, "BAR sizes are fixed by the profile")
        now = self.clock()
        if valid & abi.SetattrValid.MODE:
            # Device nodes never carry setuid/setgid bits: that is all the
            # killing of privileges FUSE_HANDLE_KILLPRIV_V2 asks of us.
            s.mode = stat.S_IFMT(s.mode) | (req.mode & 0o1777)
        if valid & abi.SetattrValid.UID:
            s.uid = req.uid
        if valid & abi.SetattrValid.GID:
            s.gid = req.gid
        if valid & abi.SetattrValid.ATIME_NOW:
            s.atime_ns = now
        elif valid & abi.SetattrValid.ATIME:
            s.atime_ns = req.atime_ns
        if valid & abi.SetattrValid.MTIME_NOW:
            s.mtime_ns = now
        elif valid & abi.SetattrValid.MTIME:
            s.mtime_ns = req.mtime_ns
        s.ctime_ns = req.ctime_ns if valid & abi.SetattrValid.CTIME else now
        return self.attr(req.nodeid)
