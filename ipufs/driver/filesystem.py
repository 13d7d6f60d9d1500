# The ipufs filesystem: the Operations that publish the node tree. Opens
# hand BARs to the kernel for passthrough or the page cache (mapping.py);
# reads and writes of registers and the mailbox reach the model; ioctls go
# to the driver; after each, the model's effects are carried out
# (effects.py). Beside the nodes sits the sysfs view (sys/bus/pci/devices/
# ADDR/...), whose attribute files are made at each read from the model
# (docs/sysfs.md). The tree is fixed: anything that would create, remove,
# rename or resize a node fails with EPERM (docs/filesystem.md has the
# whole table, checked against ipufs/fuse/operations.py's contract).
from __future__ import annotations

import errno
import os
import select
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from ipufs.driver import sysfs, sysfs_tree, xattrs
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IpuDriver, OpenFile
from ipufs.driver.mapping import BarMapping
from ipufs.driver.nodes import ROOT_INO, Entry, Kind, Node, NodeTree
from ipufs.driver.page_cache_requests import MappedStoreRequests
from ipufs.driver.pollers import PollWakeups
from ipufs.driver.view_files import ViewFiles
from ipufs.driver.work import DeviceWork
from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError
from ipufs.fuse.operations import Negotiated, Operations
from ipufs.model.profile import Region

SEEK_DATA = 3
#: The longest name statfs reports (f_namemax); the kernel passes longer
#: ones on, and they get ENAMETOOLONG as on any filesystem.
NAME_MAX = 255
SEEK_HOLE = 4
_POLL_READY = select.POLLIN | select.POLLOUT | select.POLLRDNORM | select.POLLWRNORM


class AccessCounter(Protocol):
    """Told of every request to an IPU's nodes while ``counting`` (fault
    plans count accesses); while it is not, the check costs one load."""

    counting: bool

    def count(self, ipu: int) -> None: ...


class NoCounting:
    """The access counter of a filesystem without fault plans."""

    counting = False

    def count(self, ipu: int) -> None:
        pass


@dataclass
class Ownership:
    """Owner, group and permission bits of the device nodes (the root
    directory is root's, mode 0755)."""

    uid: int = 0
    gid: int = 0
    mode: int = 0o660


@dataclass
class NodeState:
    """Per-node attributes that chmod, chown and touch may change."""

    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int


@dataclass
class Stats:
    lookups: dict[int, int] = field(default_factory=dict)  # nodeid -> lookups the kernel holds


class IpuFilesystem(MappedStoreRequests, Operations):
    """The node tree of ``devices`` as FUSE operations; the sysfs view is
    added to ``tree`` here."""

    def __init__(
        self,
        devices: DeviceSet,
        tree: NodeTree,
        *,
        driver: IpuDriver,
        mapping: BarMapping,
        pollers: PollWakeups,
        work: DeviceWork,
        use: RegisterUse,
        accesses: AccessCounter,
        ownership: Ownership,
        control_path: str,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.devices = devices
        self.tree = tree
        sysfs_tree.build(tree)  # the view's directories and attributes join the node tree
        self.driver = driver
        self.tracer = driver.tracer
        self.mapping = mapping
        self.pollers = pollers
        self.work = work
        self.use = use
        self.accesses = accesses
        self.ownership = ownership
        #: The control socket, named in the root's user.ipufs.control.
        self.control_path = control_path
        #: The driver's open files (one table; the filesystem reads it on
        #: every request, so it keeps its own reference).
        self.files = driver.files
        self.view_files = ViewFiles(devices, tree)  # open files of the sysfs view
        self.stats = Stats()
        self._next_fh = 1
        self._cleared = set()  # page_cache_requests.MappedStoreRequests
        now = clock()
        self._root = NodeState(stat.S_IFDIR | 0o755, 0, 0, now, now, now)
        # The view is root's and read-only, as sysfs is; its times are the mount's.
        self._view = {kind: NodeState(mode, 0, 0, now, now, now) for kind, mode in (
            (Kind.DIRECTORY, stat.S_IFDIR | 0o755), (Kind.ATTRIBUTE, stat.S_IFREG | 0o444),
            (Kind.LINK, stat.S_IFLNK | 0o777))}
        o = self.ownership
        self._states = [
            NodeState(stat.S_IFREG | (o.mode & 0o7777), o.uid, o.gid, now, now, now)
            for _ in range(len(self.tree))
        ]
        self.clock = clock

    @property
    def mode(self) -> str:
        """How BARs are served: mapping.PASSTHROUGH or mapping.PAGE_CACHE."""
        return self.mapping.settle()

    @property
    def mode_reason(self) -> str:
        return self.mapping.reason

    def init(self, negotiated: Negotiated) -> None:
        self.mapping.init(negotiated)

    # --- attributes -----------------------------------------------------
    def _state(self, ino: int) -> NodeState:
        if ino == ROOT_INO:
            return self._root
        node = self.tree.by_ino(ino)
        if node is None:
            return self._view[self._entry(ino).kind]
        return self._states[node.ino - ROOT_INO - 1]

    def _entry(self, ino: int) -> Entry:
        """An entry of the sysfs view."""
        try:
            return self.tree.entry(ino)
        except KeyError:
            raise FUSEError(errno.ENOENT) from None

    def _node(self, ino: int) -> Node:
        node = self.tree.by_ino(ino)
        if node is None:
            raise FUSEError(errno.EISDIR if self.tree.is_directory(ino) else errno.ENOENT)
        return node

    def attr(self, ino: int) -> rp.Attr:
        s = self._state(ino)
        node = self.tree.by_ino(ino)
        if node is None:
            if ino == ROOT_INO or s.mode & stat.S_IFDIR:
                nlink, size = 2, 0
            elif stat.S_ISLNK(s.mode):
                nlink, size = 1, len(self._entry(ino).target)
            else:
                entry = self._entry(ino)
                nlink, size = 1, sysfs.size(self.devices.profile, entry.table, entry.name)
            return rp.Attr(ino=ino, mode=s.mode, nlink=nlink, size=size, uid=s.uid, gid=s.gid,
                           atime_ns=s.atime_ns, mtime_ns=s.mtime_ns, ctime_ns=s.ctime_ns)
        size = self.devices.profile.region_size(node.region)
        # st_blocks says what the backing memory holds, not the BAR's size:
        # `du` and `ls -s` then show what the daemon really uses.
        backing = self.devices.backing.get((node.ipu, node.region))
        return rp.Attr(ino=ino, mode=s.mode, size=size, uid=s.uid, gid=s.gid,
                       atime_ns=s.atime_ns, mtime_ns=s.mtime_ns, ctime_ns=s.ctime_ns,
                       blocks=backing.blocks() if backing is not None else 0)

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
        # default_permissions: the kernel already refused callers without
        # the right to chmod, chown or touch this node.
        valid = abi.SetattrValid(req.valid)
        s = self._state(req.nodeid)
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
        return rp.AttrReply(self.attr(req.nodeid))

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
            entry = self.tree.entry(req.nodeid)
            if entry.kind is Kind.LINK:
                return rp.Data(entry.target.encode())
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

    # --- files -------------------------------------------------------------
    def open(self, req: rq.Open) -> rp.Opened:
        if self.tree.is_entry(req.nodeid):
            fh = self._next_fh
            self._next_fh += 1
            return self.view_files.open(req, fh)
        node = self._node(req.nodeid)
        if req.flags & os.O_TRUNC:
            raise FUSEError(errno.EPERM, "BAR sizes are fixed by the profile")
        flags, backing_id = self.mapping.open_flags(node)
        fh = self._next_fh
        self._next_fh += 1
        self.driver.opened(fh, node, req.ctx.pid, req.flags)
        if self.tracer.enabled:
            self.tracer.emit("open", node.ipu, node=node.name, pid=req.ctx.pid, fh=fh,
                             mode=self.mode, flags=oct(req.flags))
        self._count_access(node.ipu)
        if node.region in (Region.CONFIG, Region.MAILBOX):
            self.use.opened(node.ipu, node.ino)
        return rp.Opened(fh, flags, backing_id)

    def _count_access(self, ipu: int) -> None:
        """A request reached IPU ``ipu``: fault plans count them (a plan may
        fire here; its fault is a unit of work of its own)."""
        accesses = self.accesses
        if accesses.counting:
            accesses.count(ipu)

    def _file(self, fh: int) -> OpenFile:
        f = self.files.get(fh)
        if f is None:
            raise FUSEError(errno.EBADF)
        return f

    def read(self, req: rq.Read) -> rp.Data:
        f = self.files.get(req.fh)
        if f is None:
            return self.view_files.read(req)
        node = f.node
        ipu = self.devices.ipus[node.ipu]
        self._count_access(node.ipu)
        stores = self.mapping.stores
        if stores is not None and node.region in (Region.CONFIG, Region.MAILBOX):
            stores.filled(node.ipu, node.region, req.offset, req.size)
        if node.region is Region.CONFIG:
            data = ipu.read_config(req.offset, req.size)
            if self.tracer.enabled:
                self.tracer.emit("register-read", node.ipu, pid=req.ctx.pid, offset=req.offset, data=data)
            return rp.Data(data)
        return rp.Data(ipu.memory[node.region].read(req.offset, req.size))

    def write(self, req: rq.Write) -> rp.Written:
        node = self._file(req.fh).node
        if node.region in (Region.CONFIG, Region.MAILBOX):
            self._see_mapped_stores(node.ipu, req.unique, node.ino)
            rest = self._written_back(node, req)
            if rest is not None:
                if len(rest.data):
                    self._cleared.add(req.unique)  # retrieved already
                    self.write(rest)
                return rp.Written(len(req.data))
        ipu = self.devices.ipus[node.ipu]
        memory = ipu.memory[node.region]
        if req.offset >= memory.size and len(req.data):
            # The same answer a sealed memfd gives: the BAR cannot grow.
            raise FUSEError(errno.EPERM, "write past the end of a BAR")
        self._count_access(node.ipu)
        if node.region is Region.CONFIG:
            if self.tracer.enabled:
                self.tracer.emit("register-write", node.ipu, pid=req.ctx.pid, offset=req.offset,
                                 data=bytes(req.data))
            if ipu.changes_mask(req.offset, req.data):
                # The interrupt mask is the attached process's, as with
                # MASK/UNMASK_INTERRUPT: nothing of the write is stored.
                self.driver.check_attached(node.ipu, req.ctx.pid)
            n = ipu.write_config(req.offset, req.data)
        elif node.region is Region.MAILBOX:
            if self.tracer.enabled:
                self.tracer.emit("mailbox-write", node.ipu, pid=req.ctx.pid, offset=req.offset,
                                 data=bytes(req.data[:64]))
            n = ipu.write_mailbox(req.offset, req.data)
        else:
            n = memory.write(req.offset, req.data)
        self.work.done(node.ipu, touched=node.region in (Region.CONFIG, Region.MAILBOX))
        return rp.Written(n)

    def fsync(self, req: rq.Fsync) -> rp.Empty:
        if req.fh not in self.view_files:
            self._file(req.fh)
        return rp.Empty()

    # FLUSH is never sent (every open answers FOPEN_NOFLUSH, see
    # mapping.BarMapping.open_flags); should a kernel send it anyway, the
    # default ENOSYS stops it for good. So no close(2) ever waits on the daemon.

    def release(self, req: rq.Release) -> rp.Empty:
        self.view_files.close(req.fh)
        f = self.files.get(req.fh)
        if f is not None:
            if self.tracer.enabled:
                self.tracer.emit("close", f.node.ipu, node=f.node.name, fh=req.fh)
            self.driver.released(req.fh)
            if f.node.region in (Region.CONFIG, Region.MAILBOX):
                self.use.closed(f.node.ipu, f.node.ino)
        return rp.Empty()

    def lseek(self, req: rq.Lseek) -> rp.LseekReply:
        # A file without holes, as generic_file_llseek sees one; a view
        # attribute has sysfs's size (4096), as on real sysfs.
        if req.fh in self.view_files:
            size = sysfs.ATTRIBUTE_SIZE
        else:
            size = self.attr(self._file(req.fh).node.ino).size
        if req.offset >= size or req.offset < 0:
            raise FUSEError(errno.ENXIO)
        if req.whence == SEEK_DATA:
            return rp.LseekReply(req.offset)
        if req.whence == SEEK_HOLE:
            return rp.LseekReply(size)
        raise FUSEError(errno.EINVAL)

    def poll(self, req: rq.Poll) -> rp.PollReply:
        """BARs are always ready. The mailbox is writable, and readable while
        the ICU has responses waiting; a poller that asked to be told is
        woken (FUSE_NOTIFY_POLL) when the next response is queued."""
        if req.fh in self.view_files:
            return rp.PollReply(req.events & _POLL_READY)
        node = self._file(req.fh).node
        self._count_access(node.ipu)
        if node.region is not Region.MAILBOX:
            return rp.PollReply(req.events & _POLL_READY)
        self._see_mapped_stores(node.ipu, req.unique, node.ino)  # the host's RESPONSE_TAIL
        ready = select.POLLOUT | select.POLLWRNORM
        if self.devices.ipus[node.ipu].icu.responses_waiting:
            ready |= select.POLLIN | select.POLLRDNORM
        elif req.flags & abi.POLL_SCHEDULE_NOTIFY:
            self.pollers.add(node.ipu, req.kh)
        return rp.PollReply(req.events & ready)

    def ioctl(self, req: rq.Ioctl) -> rp.IoctlReply:
        f = self.files.get(req.fh)
        if f is None:
            if req.fh in self.view_files or self.tree.is_directory(req.nodeid):
                raise FUSEError(errno.ENOTTY, "only the device nodes take ioctls")
            raise FUSEError(errno.EBADF)
        ipu = f.node.ipu
        self._see_mapped_stores(ipu, req.unique, f.node.ino)
        self._count_access(ipu)
        if self.tracer.enabled:
            result, data = self._traced_ioctl(ipu, req)
        else:
            result, data = self.driver.ioctl(ipu, req.fh, req.ctx.pid, req.cmd, req.arg, req.in_data)
        self.work.done(ipu, True)  # touched: a client asked
        return rp.IoctlReply(result, data[: req.out_size])

    def _traced_ioctl(self, ipu: int, req: rq.Ioctl) -> tuple[int, bytes]:
        request = {"pid": req.ctx.pid, "cmd": req.cmd, "arg": req.arg, "data": bytes(req.in_data)}
        try:
            result, data = self.driver.ioctl(ipu, req.fh, req.ctx.pid, req.cmd, req.arg, req.in_data)
        except FUSEError as exc:
            self.tracer.emit("ioctl", ipu, **request, error=exc.errno)
            raise
        self.tracer.emit("ioctl", ipu, **request, result=result, out=data[:32])
        return result, data

    # --- extended attributes: read-only facts about the mount -------------
    def xattrs(self, ino: int) -> dict[bytes, bytes]:
        if ino == ROOT_INO:
            return xattrs.of_root(self.devices, self.mapping, self.control_path)
        node = self.tree.by_ino(ino)
        if node is None:
            self._state(ino)
            return {}
        return xattrs.of_node(node)

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

