# The ipufs filesystem: the Operations that publish the node tree. Opens
# hand BARs to the kernel for passthrough (so mmap maps the daemon's pages)
# or, where passthrough is unavailable, serve them through the page cache.
# Beside the nodes sits the sysfs view (sys/bus/pci/devices/ADDR/...), whose
# attribute files are made at each read from the model (docs/sysfs.md).
# The tree is fixed: anything that would create, remove, rename or resize a
# node fails with EPERM (docs/filesystem.md has the whole table).
from __future__ import annotations

import errno
import logging
import os
import select
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ipufs import __version__
from ipufs.driver.coherence import PageCachePublisher
from ipufs.driver import procs, sysfs
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IpuDriver
from ipufs.driver.nodes import ROOT_INO, Entry, Kind, Node, NodeTree
from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError
from ipufs.fuse.operations import Negotiated, Operations
from ipufs.model.profile import Region

log = logging.getLogger(__name__)

PASSTHROUGH = "passthrough"
PAGE_CACHE = "page-cache"

SEEK_DATA = 3
#: The longest name statfs reports (f_namemax); the kernel passes longer
#: ones on, and they get ENAMETOOLONG as on any filesystem.
NAME_MAX = 255
SEEK_HOLE = 4
_POLL_READY = select.POLLIN | select.POLLOUT | select.POLLRDNORM | select.POLLWRNORM


class Kernel(Protocol):
    """What the filesystem needs of the FUSE shell."""

    def backing_open(self, fd: int) -> int: ...

    def notify(self, message: bytes) -> None: ...


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


@dataclass(slots=True)
class OpenFile:
    node: Node
    pid: int
    flags: int


@dataclass
class Stats:
    lookups: dict[int, int] = field(default_factory=dict)  # nodeid -> lookups the kernel holds


class IpuFilesystem(Operations):
    def __init__(
        self,
        devices: DeviceSet,
        *,
        driver: IpuDriver | None = None,
        ownership: Ownership | None = None,
        passthrough: bool = True,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.devices = devices
        self.driver = driver or IpuDriver(devices)
        self.tracer = self.driver.tracer
        #: Called with the IPU index on every request to one of its nodes
        #: (fault plans count accesses); None costs nothing.
        self.on_access: Callable[[int], None] | None = None
        self.tree = NodeTree(len(devices))
        self.sysfs_ino = sysfs.build(self.tree)
        self.ownership = ownership or Ownership()
        self.want_passthrough = passthrough
        self.kernel: Kernel | None = None
        self.mode = PASSTHROUGH if passthrough else PAGE_CACHE
        self.mode_reason = "" if passthrough else "passthrough switched off (--no-passthrough)"
        self.publisher: PageCachePublisher | None = None
        self.files: dict[int, OpenFile] = {}
        self.attribute_files: dict[int, Entry] = {}  # open files of the sysfs view
        self.pollers: dict[int, set[int]] = {}  # ipu -> poll handles awaiting a wakeup
        self.register_users: dict[int, int] = {}  # ipu -> open config/mailbox files
        self.activity: dict[int, float] = {}  # ipu -> monotonic time of its last request
        self.stats = Stats()
        self._next_fh = 1
        self._backing_ids: dict[int, int] = {}
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
        self.control_path = ""

    # --- connection -----------------------------------------------------
    def attach_kernel(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def init(self, negotiated: Negotiated) -> None:
        if self.want_passthrough and not negotiated.passthrough:
            self._fall_back("the kernel did not offer FUSE_PASSTHROUGH (Linux 6.9+ with "
                            "CONFIG_FUSE_PASSTHROUGH is needed)")
        elif self.mode == PAGE_CACHE:
            self._fall_back(self.mode_reason)

    def _fall_back(self, reason: str) -> None:
        self.mode = PAGE_CACHE
        self.mode_reason = reason
        log.warning("serving BARs through the page cache: %s", reason)
        self.devices.track_dirty(True)
        if self.kernel is not None:
            self.publisher = PageCachePublisher(self.devices, self.tree, self.kernel.notify)

    def publish(self) -> None:
        """Make model-side writes visible to clients (page-cache mode)."""
        if self.publisher is not None:
            self.publisher.publish()

    def settle(self, ipu: int | None = None) -> None:
        """After the model acted (on one IPU, or any): publish what it wrote,
        send the signals of the interrupts it raised, wake pollers."""
        self.publish()
        # Every IPU with signals to send: an IPU's action can raise
        # interrupts across its sync group (a GS2 barrier completing).
        self.driver.deliver()
        if not self.pollers:
            return
        for index in list(self.pollers) if ipu is None else [ipu]:
            handles = self.pollers.get(index)
            if handles and self.devices.ipus[index].icu.responses_waiting and self.kernel is not None:
                for kh in handles:
                    self.kernel.notify(rp.notify_poll_wakeup(kh))
                del self.pollers[index]

    def watched(self) -> list[int]:
        """IPUs whose config space or mailbox is open: the ones whose
        registers a client may store to through a mapping."""
        return [ipu for ipu, count in self.register_users.items() if count]

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
                nlink, size = 1, sysfs.ATTRIBUTE_SIZE
            return rp.Attr(ino=ino, mode=s.mode, nlink=nlink, size=size, uid=s.uid, gid=s.gid,
                           atime_ns=s.atime_ns, mtime_ns=s.mtime_ns, ctime_ns=s.ctime_ns)
        size = self.devices.profile.region_size(node.region)
        # st_blocks says what the backing memory holds, not the BAR's size:
        # `du` and `ls -s` then show what the daemon really uses.
        backing = self.devices.backing.get((node.ipu, node.region))
        return rp.Attr(ino=ino, mode=s.mode, size=size, uid=s.uid, gid=s.gid,
                       atime_ns=s.atime_ns, mtime_ns=s.mtime_ns, ctime_ns=s.ctime_ns,
                       blocks=backing.blocks() if backing is not None else 0)

    def lookup(self, req: rq.Lookup) -> rp.Reply:
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

    def getattr(self, req: rq.Getattr) -> rp.Reply:
        return rp.AttrReply(self.attr(req.nodeid))

    def setattr(self, req: rq.Setattr) -> rp.Reply:
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

    def statfs(self, req: rq.Statfs) -> rp.Reply:
        total = sum(self.attr(n.ino).size for n in self.tree)
        return rp.StatfsReply(blocks=total // 4096, files=len(self.tree) + 1 + sum(1 for _ in self.tree.entries()))

    def access(self, req: rq.Access) -> rp.Reply:
        self._state(req.nodeid)
        return rp.Empty()

    # --- the fixed tree --------------------------------------------------
    def _fixed(self, req: rq.Request) -> rp.Reply:
        raise FUSEError(errno.EPERM, "the ipufs tree is fixed")

    mknod = mkdir = symlink = unlink = rmdir = rename = link = create = _fixed

    def readlink(self, req: rq.Readlink) -> rp.Reply:
        if self.tree.is_entry(req.nodeid):
            entry = self.tree.entry(req.nodeid)
            if entry.kind is Kind.LINK:
                return rp.Data(entry.target.encode())
        raise FUSEError(errno.EINVAL)

    def fallocate(self, req: rq.Fallocate) -> rp.Reply:
        raise FUSEError(errno.EOPNOTSUPP, "BARs have fixed, fully allocated sizes")

    # --- directory ----------------------------------------------------------
    def opendir(self, req: rq.Opendir) -> rp.Reply:
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

    def readdir(self, req: rq.Readdir) -> rp.Reply:
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

    def releasedir(self, req: rq.Releasedir) -> rp.Reply:
        return rp.Empty()

    def fsyncdir(self, req: rq.Fsyncdir) -> rp.Reply:
        return rp.Empty()

    # --- files -------------------------------------------------------------
    def _open_flags(self, node: Node) -> tuple[int, int]:
        """FOPEN_* flags and backing id for an open of ``node``. Every file
        gets FOPEN_NOFLUSH: nothing needs doing at close, and without it
        the kernel sends FLUSH at every close until it has seen the first
        ENOSYS, so a close on a fresh connection could wait on a hung
        daemon (uninterruptibly)."""
        trapped = node.region in (Region.CONFIG, Region.MAILBOX) or self.devices.persistent
        flags = abi.OpenFlag.NOFLUSH | (abi.OpenFlag.DIRECT_IO if trapped else abi.OpenFlag(0))
        if self.mode == PASSTHROUGH:
            backing_id = self._backing_id(node)
            if backing_id is not None:
                return int(flags | abi.OpenFlag.PASSTHROUGH), backing_id
        return int(flags), 0

    def _backing_id(self, node: Node) -> int | None:
        backing_id = self._backing_ids.get(node.ino)
        if backing_id is not None:
            return backing_id
        if self.kernel is None:
            self._fall_back("no kernel channel to register backing files")
            return None
        bf = self.devices.backing[node.ipu, node.region]
        try:
            backing_id = self.kernel.backing_open(bf.fd)
        except OSError as exc:
            self._fall_back(f"FUSE_DEV_IOC_BACKING_OPEN failed: {exc.strerror} "
                            "(passthrough needs CAP_SYS_ADMIN)")
            return None
        self._backing_ids[node.ino] = backing_id
        return backing_id

    def open(self, req: rq.Open) -> rp.Reply:
        if self.tree.is_entry(req.nodeid):
            return self._open_attribute(req)
        node = self._node(req.nodeid)
        if req.flags & os.O_TRUNC:
            raise FUSEError(errno.EPERM, "BAR sizes are fixed by the profile")
        flags, backing_id = self._open_flags(node)
        fh = self._next_fh
        self._next_fh += 1
        self.files[fh] = OpenFile(node, req.ctx.pid, req.flags)
        self.driver.opened(fh, node.ipu, procs.tgid_of(req.ctx.pid),
                           writable=req.flags & os.O_ACCMODE != os.O_RDONLY)
        if self.tracer.enabled:
            self.tracer.emit("open", node.ipu, node=node.name, pid=req.ctx.pid, fh=fh,
                             mode=self.mode, flags=oct(req.flags))
        if self.on_access is not None:
            self.on_access(node.ipu)
        if node.region in (Region.CONFIG, Region.MAILBOX):
            self.register_users[node.ipu] = self.register_users.get(node.ipu, 0) + 1
            self.activity[node.ipu] = time.monotonic()
        return rp.Opened(fh, flags, backing_id)

    def _open_attribute(self, req: rq.Open) -> rp.Reply:
        """An attribute file of the view: read-only, as sysfs refuses writes
        to a file without a store method (even to root) with EACCES; read
        straight from the daemon each time, as its value is live."""
        entry = self.tree.entry(req.nodeid)
        if entry.kind is not Kind.ATTRIBUTE:
            raise FUSEError(errno.EISDIR if entry.kind is Kind.DIRECTORY else errno.ELOOP)
        if req.flags & os.O_ACCMODE != os.O_RDONLY or req.flags & os.O_TRUNC:
            raise FUSEError(errno.EACCES, "sysfs attributes are read-only")
        fh = self._next_fh
        self._next_fh += 1
        self.attribute_files[fh] = entry
        return rp.Opened(fh, abi.OpenFlag.DIRECT_IO)

    def _read_attribute(self, req: rq.Read) -> rp.Reply:
        entry = self.attribute_files.get(req.fh)
        if entry is None:
            raise FUSEError(errno.EBADF)
        value = sysfs.read(self.devices.ipus[entry.ipu], entry.table, entry.name)
        return rp.Data(value[req.offset : req.offset + req.size])

    def _file(self, fh: int) -> OpenFile:
        f = self.files.get(fh)
        if f is None:
            raise FUSEError(errno.EBADF)
        return f

    def read(self, req: rq.Read) -> rp.Reply:
        f = self.files.get(req.fh)
        if f is None:
            return self._read_attribute(req)
        node = f.node
        ipu = self.devices.ipus[node.ipu]
        if self.on_access is not None:
            self.on_access(node.ipu)
        if node.region is Region.CONFIG:
            data = ipu.read_config(req.offset, req.size)
            if self.tracer.enabled:
                self.tracer.emit("register-read", node.ipu, pid=req.ctx.pid, offset=req.offset, data=data)
            return rp.Data(data)
        return rp.Data(ipu.memory[node.region].read(req.offset, req.size))

    def write(self, req: rq.Write) -> rp.Reply:
        node = self._file(req.fh).node
        ipu = self.devices.ipus[node.ipu]
        memory = ipu.memory[node.region]
        if req.offset >= memory.size and len(req.data):
            # The same answer a sealed memfd gives: the BAR cannot grow.
            raise FUSEError(errno.EPERM, "write past the end of a BAR")
        if self.on_access is not None:
            self.on_access(node.ipu)
        if node.region is Region.CONFIG:
            if self.tracer.enabled:
                self.tracer.emit("register-write", node.ipu, pid=req.ctx.pid, offset=req.offset,
                                 data=bytes(req.data))
            if ipu.changes_mask(req.offset, req.data):
                # The interrupt mask is the attached process's, as with
                # MASK/UNMASK_INTERRUPT: nothing of the write is stored.
                self.driver.check_attached(node.ipu, req.ctx.pid)
            n = ipu.write_config(req.offset, req.data)
            self.activity[node.ipu] = time.monotonic()
        elif node.region is Region.MAILBOX:
            if self.tracer.enabled:
                self.tracer.emit("mailbox-write", node.ipu, pid=req.ctx.pid, offset=req.offset,
                                 data=bytes(req.data[:64]))
            n = ipu.write_mailbox(req.offset, req.data)
            self.activity[node.ipu] = time.monotonic()
        else:
            n = memory.write(req.offset, req.data)
        self.settle(node.ipu)
        return rp.Written(n)

    def fsync(self, req: rq.Fsync) -> rp.Reply:
        if req.fh not in self.attribute_files:
            self._file(req.fh)
        return rp.Empty()

    # FLUSH is never sent (every open answers FOPEN_NOFLUSH, see
    # _open_flags); should a kernel send it anyway, the default ENOSYS
    # stops it for good. So no close(2) ever waits on the daemon.

    def release(self, req: rq.Release) -> rp.Reply:
        self.attribute_files.pop(req.fh, None)
        f = self.files.pop(req.fh, None)
        if f is not None:
            if self.tracer.enabled:
                self.tracer.emit("close", f.node.ipu, node=f.node.name, fh=req.fh)
            self.driver.released(req.fh)
            if f.node.region in (Region.CONFIG, Region.MAILBOX):
                self.register_users[f.node.ipu] -= 1
        return rp.Empty()

    def lseek(self, req: rq.Lseek) -> rp.Reply:
        size = self.attr(self._file(req.fh).node.ino).size
        if req.offset >= size or req.offset < 0:
            raise FUSEError(errno.ENXIO)
        if req.whence == SEEK_DATA:
            return rp.LseekReply(req.offset)
        if req.whence == SEEK_HOLE:
            return rp.LseekReply(size)
        raise FUSEError(errno.EINVAL)

    def poll(self, req: rq.Poll) -> rp.Reply:
        """BARs are always ready. The mailbox is writable, and readable while
        the ICU has responses waiting; a poller that asked to be told is
        woken (FUSE_NOTIFY_POLL) when the next response is queued."""
        if req.fh in self.attribute_files:
            return rp.PollReply(req.events & _POLL_READY)
        node = self._file(req.fh).node
        if self.on_access is not None:
            self.on_access(node.ipu)
        if node.region is not Region.MAILBOX:
            return rp.PollReply(req.events & _POLL_READY)
        ready = select.POLLOUT | select.POLLWRNORM
        if self.devices.ipus[node.ipu].icu.responses_waiting:
            ready |= select.POLLIN | select.POLLRDNORM
        elif req.flags & abi.POLL_SCHEDULE_NOTIFY:
            self.pollers.setdefault(node.ipu, set()).add(req.kh)
        return rp.PollReply(req.events & ready)

    def ioctl(self, req: rq.Ioctl) -> rp.Reply:
        f = self.files.get(req.fh)
        if f is None:
            if req.fh in self.attribute_files or self.tree.is_directory(req.nodeid):
                raise FUSEError(errno.ENOTTY, "only the device nodes take ioctls")
            raise FUSEError(errno.EBADF)
        ipu = f.node.ipu
        if self.on_access is not None:
            self.on_access(ipu)
        if self.tracer.enabled:
            result, data = self._traced_ioctl(ipu, req)
        else:
            result, data = self.driver.ioctl(ipu, req.fh, req.ctx.pid, req.cmd, req.arg, req.in_data)
        self.activity[ipu] = time.monotonic()
        self.settle(ipu)
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
            p = self.devices.profile
            return {
                b"user.ipufs.version": __version__.encode(),
                b"user.ipufs.mode": self.mode.encode(),
                b"user.ipufs.mode_reason": self.mode_reason.encode(),
                b"user.ipufs.profile": p.name.encode(),
                b"user.ipufs.ipus": str(len(self.devices)).encode(),
                b"user.ipufs.pid": str(os.getpid()).encode(),
                b"user.ipufs.persistent": b"1" if self.devices.persistent else b"0",
                b"user.ipufs.control": self.control_path.encode(),
            }
        node = self.tree.by_ino(ino)
        if node is None:
            self._state(ino)
            return {}
        return {
            b"user.ipufs.ipu": str(node.ipu).encode(),
            b"user.ipufs.region": node.region.value.encode(),
            # What the compatibility library reports as st_rdev (docs/compat.md).
            b"user.ipufs.rdev": f"{os.major(node.rdev)}:{os.minor(node.rdev)}".encode(),
        }

    def getxattr(self, req: rq.Getxattr) -> rp.Reply:
        value = self.xattrs(req.nodeid).get(req.name)
        if value is None:
            raise FUSEError(errno.ENODATA)
        return _sized(value, req.size)

    def listxattr(self, req: rq.Listxattr) -> rp.Reply:
        names = b"".join(name + b"\0" for name in self.xattrs(req.nodeid))
        return _sized(names, req.size)

    def setxattr(self, req: rq.Setxattr) -> rp.Reply:
        self._state(req.nodeid)
        raise FUSEError(errno.EPERM, "ipufs attributes are read-only")

    def removexattr(self, req: rq.Removexattr) -> rp.Reply:
        self._state(req.nodeid)
        raise FUSEError(errno.EPERM, "ipufs attributes are read-only")


def _sized(value: bytes, size: int) -> rp.Reply:
    if size == 0:
        return rp.XattrSize(len(value))
    if size < len(value):
        raise FUSEError(errno.ERANGE)
    return rp.Data(value)
