# The device nodes' side of the filesystem (ipuN, ipuN_ex, ipuN_mailbox,
# ipuN_mem): their attributes and their open files. Opens hand BARs to the
# kernel for passthrough or the page cache (mapping.py); reads and writes
# of registers and the mailbox reach the model; ioctls go to the driver;
# each is a unit of work (work.py), so what the model did is carried out
# before the reply. The router (filesystem.py) hands each request on
# whose inode or file handle is a device node's.
from __future__ import annotations

import errno
import os
import select
from typing import Protocol

from ipufs.driver import events
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IpuDriver, OpenFile
from ipufs.driver.mapping import BarMapping
from ipufs.driver.nodes import Node, NodeTree
from ipufs.driver.page_cache_requests import MappedStoreRequests
from ipufs.driver.pollers import PollWakeups
from ipufs.driver.work import DeviceWork
from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError
from ipufs.model.profile import Region

POLL_READY = select.POLLIN | select.POLLOUT | select.POLLRDNORM | select.POLLWRNORM
#: The regions whose stores are registers (a client's request to one marks
#: its IPU busy; their mapped stores are watched).
REGISTERS = (Region.CONFIG, Region.MAILBOX)


class AccessCounter(Protocol):
    """Told of every request to an IPU's nodes while ``counting`` (fault
    plans count accesses); while it is not, the check costs one load."""

    counting: bool

    def count(self, ipu: int) -> None: ...


class NoCounting:
    """The access counter of a daemon without fault plans."""

    counting = False

    def count(self, ipu: int) -> None:
        pass


class OpenFiles(Protocol):
    """Told of every open and release of a device node: the native fast
    path (ipufs/driver/fast_path.py) answers requests on open files."""

    @property
    def state(self) -> str:
        """Whether it answers now (the root's user.ipufs.fast_path)."""

    def opened(self, fh: int, f: OpenFile) -> None: ...

    def released(self, fh: int) -> None: ...


class NoFastPath:
    """The open files' listener of a daemon without the fast path."""

    state = "off"

    def opened(self, fh: int, f: OpenFile) -> None:
        pass

    def released(self, fh: int) -> None:
        pass


class DeviceNodes(MappedStoreRequests):
    """The device nodes of ``devices``: sizes, opens and their files."""

    def __init__(self, devices: DeviceSet, tree: NodeTree, *, driver: IpuDriver, mapping: BarMapping,
                 pollers: PollWakeups, work: DeviceWork, use: RegisterUse, accesses: AccessCounter,
                 fast: OpenFiles) -> None:
        self.devices = devices
        self.tree = tree
        self.driver = driver
        self.tracer = driver.tracer
        self.mapping = mapping
        self.pollers = pollers
        self.work = work
        self.use = use
        self.accesses = accesses
        self.fast = fast
        #: The driver's open files (one table; read on every request).
        self.files = driver.files
        self._cleared = set()  # page_cache_requests.MappedStoreRequests

    def __contains__(self, fh: int) -> bool:
        return fh in self.files

    def size(self, node: Node) -> int:
        return self.devices.profile.region_size(node.region)

    def blocks(self, node: Node) -> int:
        """What the backing memory holds, not the BAR's size: `du` and `ls
        -s` then show what the daemon really uses."""
        backing = self.devices.backing.get((node.ipu, node.region))
        return backing.blocks() if backing is not None else 0

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

    def open(self, req: rq.Open, node: Node, fh: int) -> rp.Opened:
        if req.flags & os.O_TRUNC:
            raise FUSEError(errno.EPERM, "BAR sizes are fixed by the profile")
        f = self.driver.opened(fh, node, req.ctx.pid, req.flags, req.ctx.uid)
        flags, backing_id = self.mapping.open_flags(node)
        self.fast.opened(fh, f)
        if self.tracer.enabled:
            self.tracer.emit(events.Opened(node.ipu, node.name, req.ctx.pid, fh, self.mapping.settle(), req.flags))
        self._count_access(node.ipu)
        if node.region in REGISTERS:
            self.use.opened(node.ipu, node.ino)
        return rp.Opened(fh, flags, backing_id)

    def read(self, req: rq.Read, f: OpenFile) -> rp.Data:
        node = f.node
        ipu = self.devices.ipus[node.ipu]
        self._count_access(node.ipu)
        stores = self.mapping.stores
        if stores is not None and node.region in REGISTERS:
            stores.filled(node.ipu, node.region, req.offset, req.size)
        if node.region is Region.CONFIG:
            data = ipu.read_config(req.offset, req.size)
            if self.tracer.enabled:
                self.tracer.emit(events.RegisterRead(node.ipu, req.ctx.pid, req.offset, data))
            return rp.Data(data)
        return rp.Data(ipu.memory[node.region].read(req.offset, req.size))

    def write(self, req: rq.Write) -> rp.Written:
        node = self._file(req.fh).node
        offset, data = req.offset, req.data
        if node.region in REGISTERS:
            self._see_mapped_stores(node.ipu, req.unique, node.ino)
            skip = self._written_back(node, req)
            if skip:  # a writeback: what lies past the watched pages is stored, and it is all written
                if skip < len(data):
                    self._store(node, req.ctx.pid, offset + skip, data[skip:])
                return rp.Written(len(data))
        if self.driver.attachments.by_ipu:  # who may write costs nothing while nobody is attached
            self.driver.check_change(node.ipu, req.fh, f"write to {node.name}")
        return rp.Written(self._store(node, req.ctx.pid, offset, data))

    def _store(self, node: Node, pid: int, offset: int, data: memoryview) -> int:
        """A client's write of ``data`` at ``offset`` of ``node``, into the
        model: once per WRITE request; the bytes taken."""
        ipu = self.devices.ipus[node.ipu]
        memory = ipu.memory[node.region]
        if offset >= memory.size and len(data):
            # The same answer a sealed memfd gives: the BAR cannot grow.
            raise FUSEError(errno.EPERM, "write past the end of a BAR")
        self._count_access(node.ipu)
        if node.region is Region.CONFIG:
            if self.tracer.enabled:
                self.tracer.emit(events.RegisterWrite(node.ipu, pid, offset, bytes(data)))
            n = self.driver.write_config(node.ipu, pid, offset, data)
        elif node.region is Region.MAILBOX:
            if self.tracer.enabled:
                self.tracer.emit(events.MailboxWrite(node.ipu, pid, offset, bytes(data[:64])))
            n = ipu.write_mailbox(offset, data)
        else:
            n = memory.write(offset, data)
        self.work.done(node.ipu, node.region in REGISTERS)  # touched: a client wrote registers
        return n

    def release(self, f: OpenFile, fh: int) -> None:
        if self.tracer.enabled:
            self.tracer.emit(events.Closed(f.node.ipu, f.node.name, fh))
        self.fast.released(fh)
        self.driver.released(fh)
        if f.node.region in REGISTERS:
            self.use.closed(f.node.ipu, f.node.ino)

    def poll(self, req: rq.Poll, f: OpenFile) -> rp.PollReply:
        """BARs are always ready. The mailbox is writable, and readable while
        the ICU has responses waiting; a poller that asked to be told is
        woken (FUSE_NOTIFY_POLL) when the next response is queued."""
        node = f.node
        self._count_access(node.ipu)
        if node.region is not Region.MAILBOX:
            return rp.PollReply(req.events & POLL_READY)
        self._see_mapped_stores(node.ipu, req.unique, node.ino)  # the host's RESPONSE_TAIL
        ready = select.POLLOUT | select.POLLWRNORM
        if self.devices.ipus[node.ipu].icu.responses_waiting:
            ready |= select.POLLIN | select.POLLRDNORM
        elif req.flags & abi.POLL_SCHEDULE_NOTIFY:
            self.pollers.add(node.ipu, req.kh)
        return rp.PollReply(req.events & ready)

    def leaves_tiles(self, cmd: int) -> bool:
        """Whether serving ioctl ``cmd`` leaves running tiles running: the
        ioctl does (the driver's table), and nothing around it acts on the
        model (mapped stores seen first in page-cache mode, a fault plan
        counting the request, signals waiting to go: one that finds its
        process gone detaches it, which publishes the tiles' registers)."""
        return (self.mapping.stores is None and not self.accesses.counting and not self.devices.deliverable
                and self.driver.leaves_tiles(cmd))

    def ioctl(self, req: rq.Ioctl, f: OpenFile) -> rp.IoctlReply:
        ipu = f.node.ipu
        if self.mapping.stores is not None:  # page-cache mode only (the ioctl path is hot)
            self._see_mapped_stores(ipu, req.unique, f.node.ino)
        self._count_access(ipu)
        if self.tracer.enabled:
            result, data = self._traced_ioctl(ipu, req)
        else:
            result, data = self.driver.ioctl(ipu, req.fh, req.ctx.pid, req.cmd, req.arg, req.in_data)
        self.work.done(ipu, True)  # touched: a client asked
        return rp.IoctlReply(result, data[: req.out_size])

    def _traced_ioctl(self, ipu: int, req: rq.Ioctl) -> tuple[int, bytes]:
        given = bytes(req.in_data)
        try:
            result, data = self.driver.ioctl(ipu, req.fh, req.ctx.pid, req.cmd, req.arg, req.in_data)
        except FUSEError as exc:
            self.tracer.emit(events.IoctlDone(ipu, req.ctx.pid, req.cmd, req.arg, given, error=exc.errno))
            raise
        self.tracer.emit(events.IoctlDone(ipu, req.ctx.pid, req.cmd, req.arg, given, result, bytes(data[:32])))
        return result, data
