# The PCIe driver personality: open files, the 0xED ioctls (the driver's
# half of the ioctl table, IOCTL_ROLES; the mailbox's handlers are
# mailbox_ioctls.py's) and attachments. Interrupts reach the attached
# process as signals (signals.py), the device reaches its buffers by DMA
# (dma.py). docs/abi.md has every ioctl and errno.
from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import MethodType
from typing import NamedTuple, TypeVar

from ipufs.abi import ioctls as abi
from ipufs.abi.icu import MESSAGE as icu_message
from ipufs.abi.interrupts import ALL_SOURCES, Interrupt
from ipufs.abi.ioctls import Dir, IoctlSpec
from ipufs.abi.registers import TDI_ERRNOS, TdiResult
from ipufs.native import FastAnswer
from ipufs.driver import buffer_ioctls, device_ioctls, events, mailbox_ioctls, procs
from ipufs.driver.arguments import U64, Arg, Arguments, Command, Sizes
from ipufs.driver.attachments import Attachment, AttachmentTable
from ipufs.driver.devices import DeviceSet
from ipufs.driver.dma import AttachedBuffers, BufferDma
from ipufs.driver.events import EventSink
from ipufs.driver.nodes import Node
from ipufs.driver.signals import SignalDelivery
from ipufs.driver.system import REAL, SystemCalls
from ipufs.driver.watch import ExitWatcher
from ipufs.driver.while_attached import EXCLUSIVE, WhileAttached
from ipufs.fuse.errors import FUSEError
from ipufs.model.debug import TdiRefused

log = logging.getLogger(__name__)
T = TypeVar("T")

#: An ioctl handler: (driver, ipu, fh, caller's thread group, the argument
#: value, the argument bytes, the decoded command) -> (result, bytes back).
Handler = Callable[["IpuDriver", int, int, int, int, Arg, Command], tuple[int, bytes]]


@dataclass(slots=True)
class OpenFile:
    """One open of a node: the driver's only record of it."""

    node: Node
    pid: int  # the opening thread, as the FUSE header names it
    tgid: int | None  # its process, None when it was already gone
    flags: int  # open(2) flags
    writable: bool  # not O_RDONLY: what ioctls that need a writable open ask
    by_root: bool = False  # opened by uid 0 (as the FUSE header names it): while_attached lets it change the IPU


_starvation_logged = False


def _starved_as_eagain(call: Callable[..., T], *args: object) -> T:
    """``call(*args)``, with the daemon's own lack of file descriptors or
    memory (EMFILE, ENFILE, ENOMEM) answered EAGAIN: it is no fault of the
    caller, who may try again (docs/abi.md). Logged once per daemon."""
    global _starvation_logged
    try:
        return call(*args)
    except OSError as exc:
        if exc.errno not in procs.STARVED:
            raise
        if not _starvation_logged:
            log.error("out of file descriptors or memory (%s): answering EAGAIN", os.strerror(exc.errno or 0))
            _starvation_logged = True
        raise FUSEError(errno.EAGAIN, "the daemon is out of file descriptors or memory") from exc


def _as_int32(value: int) -> int:
    """An ioctl argument as a C int: a 32-bit value, signed or unsigned, or
    a negative int sign-extended to 64 bits."""
    if value >= 1 << 63:
        value -= 1 << 64
    if -(1 << 31) <= value < 1 << 32:
        return value - (1 << 32) if value >= 1 << 31 else value
    raise FUSEError(errno.EINVAL, "SET_IPU_ID takes an int")


class IoctlRole(NamedTuple):
    """The driver's side of one ioctl of the ABI table (ipufs/abi/ioctls.py,
    which has the numbers, encodings and the needs-a-writable-open column):
    its handler; whether the caller matters (the handler then gets the
    caller's thread group, looked up in /proc unless it is the attached
    process, and the call fails with ESRCH when the caller is gone); the
    _IOC_SIZE values it is served with (None: any); and how the native
    fast path answers it without Python (ipufs/driver/fast_path.py;
    NONE: only here), which must be what the handler answers, byte for
    byte, in the cases the fast path takes; and whether it leaves the
    tiles alone: the handler touches only the driver's state and the
    model's that running tiles never see (not their state or memory, nor
    registers or anything the model derives from them), so the daemon
    serves it without stopping them (TileLock.acquire_quietly)."""

    handler: Handler
    caller_matters: bool
    sizes: Sizes | None
    fast: FastAnswer = FastAnswer.NONE
    leaves_tiles: bool = False


def _spec(cmd: int) -> IoctlSpec | None:
    """The ioctl of the ABI table ``cmd`` names by (type, nr), if any."""
    _, type_, nr, _ = abi.ioc_fields(cmd)
    return abi.BY_NR.get(nr) if type_ == abi.IOCTL_TYPE else None


#: Decoded commands kept at most (random numbers must not grow the cache).
_MAX_DECODED = 512


class IpuDriver:
    """The driver of the IPUs in ``devices``: their open files, ioctls,
    attachments, signals and DMA. ``exits`` learns when attached processes
    exit; ``events`` hears what the driver does (the trace); ``system``
    makes the system calls on client processes."""

    def __init__(
        self,
        devices: DeviceSet,
        *,
        exits: ExitWatcher,
        events: EventSink,
        system: SystemCalls = REAL,
        while_attached: str = EXCLUSIVE,
    ) -> None:
        self.devices = devices
        self.tracer = events
        self.exits = exits
        self.system = system
        self.arguments = Arguments(system)
        self.attachments = AttachmentTable()
        #: Every open file, by its handle.
        self.files: dict[int, OpenFile] = {}
        #: Interrupts sent as signals to the attached processes, and counted.
        self.signals = SignalDelivery(devices, self.attachments, system, events, self.detach)
        #: The device side's transfers into the attached processes' buffers.
        self.dma = BufferDma(self.attachments, system)
        for index, model in enumerate(devices.ipus):  # the tiles' host packets reach the buffers
            model.execution.exchange.host.memory = AttachedBuffers(self.dma, index)
        #: Who may change an IPU while a process is attached to it.
        self.while_attached = WhileAttached(while_attached, self.attachments, system.alive)
        self._alive = system.alive
        self._tgid_of = system.tgid_of
        # Command number -> everything serving it needs, decoded on first
        # use: one dictionary lookup per request after that.
        self._commands: dict[int, Command] = {}

    # --- files ---------------------------------------------------------------
    def opened(self, fh: int, node: Node, pid: int, flags: int, uid: int) -> OpenFile:
        """Record an open of ``node`` by thread ``pid`` of user ``uid``; one
        for writing is refused (EBUSY) while another process is attached
        (WhileAttached). It does not join an attachment the process holds:
        the kernel may deliver this OPEN before the RELEASE of a file the
        process closed earlier, so only ATTACH through a file makes it hold
        the attachment (then closing every file detaches, whatever the
        order of the two)."""
        f = OpenFile(node, pid, self._tgid_of(pid), flags, flags & os.O_ACCMODE != os.O_RDONLY, uid == 0)
        if f.writable:
            self.while_attached.check(node.ipu, f.tgid, f.by_root, "open its nodes for writing")
        self.files[fh] = f
        return f

    def check_change(self, ipu: int, fh: int, what: str) -> None:
        """Refuse ``what`` through file ``fh`` unless the file may change
        IPU ``ipu``: opened for writing (EBADF), and while another process
        is attached, by that process or root (EBUSY, WhileAttached)."""
        f = self.files[fh]
        if not f.writable:
            raise FUSEError(errno.EBADF, f"to {what} needs a file opened for writing")
        self.while_attached.check(ipu, f.tgid, f.by_root, what)

    def released(self, fh: int) -> OpenFile | None:
        """Forget an open file; the attachment it was the last of ends."""
        f = self.files.pop(fh, None)
        att = self.attachments.get(f.node.ipu) if f is not None else None
        if att is not None and fh in att.handles:
            att.handles.discard(fh)
            if not att.handles:
                self.detach(att.ipu, "its last file was closed")
        return f

    # --- ioctls ----------------------------------------------------------------
    def ioctl(self, ipu: int, fh: int, pid: int, cmd: int, arg: int, data: Arg) -> tuple[int, bytes]:
        """Serve one ioctl of thread ``pid`` on IPU ``ipu``: returns the
        ioctl's result and the bytes to copy back to the caller. The
        interrupts it raises are the caller's to deliver (``deliver``)."""
        command = self._commands.get(cmd)
        if command is None:
            command = self._decode(cmd)
        if command.carried_in and len(data) != command.size:
            raise FUSEError(errno.EINVAL, "argument shorter than its encoding")
        if command.needs_write and not self.files[fh].writable:
            raise FUSEError(errno.EBADF, "this ioctl needs a file opened for writing")
        if command.caller_matters:
            tgid = _starved_as_eagain(self._caller, ipu, pid)
            if tgid is None:
                raise FUSEError(errno.ESRCH, "the caller is gone")
        else:
            tgid = pid  # who asks does not matter: spare the /proc lookup
        return command.handler(ipu, fh, tgid, arg, data, command)

    def leaves_tiles(self, cmd: int) -> bool:
        """Whether ioctl ``cmd`` leaves the tiles alone (IoctlRole)."""
        spec = _spec(cmd)
        return spec is not None and IOCTL_ROLES[spec].leaves_tiles

    def _decode(self, cmd: int) -> Command:
        """Match ``cmd`` on (type, nr) and take its size from _IOC_SIZE: any
        direction and any size the ioctl can be served with is accepted."""
        direction, _, _, size = abi.ioc_fields(cmd)
        spec = _spec(cmd)
        if spec is None:
            raise FUSEError(errno.ENOTTY)
        role = IOCTL_ROLES[spec]
        if role.sizes is not None and not role.sizes.allow(size):
            raise FUSEError(errno.EINVAL, f"{spec.name} takes {role.sizes.complaint}, not {size} bytes")
        command = Command(MethodType(role.handler, self), role.caller_matters, spec.needs_write, size,
                          size if direction & Dir.WRITE else 0, size if direction & Dir.READ else 0)
        if len(self._commands) < _MAX_DECODED:
            self._commands[cmd] = command
        return command

    def _caller(self, ipu: int, pid: int) -> int | None:
        """The thread group of calling thread ``pid``. The main thread of the
        attached process needs no /proc lookup: its pid is the group's, and
        the attachment's pidfd says whether that process still lives (so a
        recycled pid is not mistaken for it)."""
        att = self.attachments.get(ipu)
        if att is not None and att.pid == pid and self._alive(att.pidfd):
            return pid
        return self._tgid_of(pid)

    def caller_attachment(self, ipu: int, tgid: int) -> Attachment:
        att = self.attachments.get(ipu)
        if att is None or att.pid != tgid:
            raise FUSEError(errno.EPERM, "only the attached process may do this")
        return att

    def write_config(self, ipu: int, pid: int, offset: int, data: bytes | memoryview) -> int:
        """A host write of config space (pwrite on ipuN) by thread ``pid``.
        The interrupt mask is the attached process's, as with
        MASK/UNMASK_INTERRUPT: a write that would change it is refused
        (EPERM, nothing of it stored) unless that process makes it. A
        refused store to a per-tile TDI register fails with the errno of
        registers.TDI_ERRNOS (EIO for others)."""
        model = self.devices.ipus[ipu]
        if model.changes_mask(offset, data):
            self.check_attached(ipu, pid)
        try:
            return model.write_config(offset, data)
        except TdiRefused as refused:  # a per-tile TDI register (docs/registers.md)
            raise FUSEError(TDI_ERRNOS.get(TdiResult(refused.result), errno.EIO), str(refused)) from None

    def check_attached(self, ipu: int, pid: int) -> None:
        """Refuse (EPERM) unless thread ``pid`` belongs to the process
        attached to IPU ``ipu``: the rule of MASK/UNMASK_INTERRUPT, which a
        pwrite of INT_MASK follows too."""
        tgid = self._caller(ipu, pid)
        if tgid is None:
            raise FUSEError(errno.ESRCH, "the caller is gone")
        self.caller_attachment(ipu, tgid)

    def _attach(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: Command) -> tuple[int, bytes]:
        att = self.attachments.get(ipu)
        if att is not None and not self._alive(att.pidfd):
            self.detach(ipu, "its process exited")
            att = None
        if att is not None:
            if att.pid != tgid:
                raise FUSEError(errno.EBUSY, f"IPU {ipu} is attached to process {att.pid}")
            att.handles.add(fh)
            return 0, b""
        try:
            pidfd = _starved_as_eagain(self.system.pidfd_open, tgid)
        except OSError as exc:
            raise FUSEError(errno.ESRCH, "the caller is gone") from exc
        handles = {h for h, f in self.files.items() if f.node.ipu == ipu and f.tgid == tgid} | {fh}
        att = Attachment(ipu=ipu, pid=tgid, pidfd=pidfd, ipu_id=ipu, handles=handles)
        self.attachments.add(att)
        self.devices.ipus[ipu].clear_interrupts()
        self.exits.watch(pidfd, lambda: self.detach(ipu, "its process exited", pidfd))
        log.info("IPU %d attached to process %d", ipu, tgid)
        if self.tracer.enabled:
            self.tracer.emit(events.Attached(ipu, tgid, self.system.command_of(tgid)))
        return 0, b""

    def _set_ipu_id(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: Command) -> tuple[int, bytes]:
        att = self.caller_attachment(ipu, tgid)
        att.ipu_id = _as_int32(arg)
        return 0, b""

    def _mask_bits(self, tgid: int, arg: int, data: Arg, command: Command) -> int:
        bits = self.arguments.value(tgid, arg, data, command)
        if bits & ~ALL_SOURCES:
            raise FUSEError(errno.EINVAL, "unknown interrupt source bits")
        return bits

    def _mask(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: Command) -> tuple[int, bytes]:
        self.caller_attachment(ipu, tgid)
        model = self.devices.ipus[ipu]
        model.set_interrupt_mask(model.interrupts.mask | self._mask_bits(tgid, arg, data, command))
        return 0, self.arguments.value_back(model.interrupts.mask, command)

    def _unmask(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: Command) -> tuple[int, bytes]:
        self.caller_attachment(ipu, tgid)
        model = self.devices.ipus[ipu]
        model.set_interrupt_mask(model.interrupts.mask & ~self._mask_bits(tgid, arg, data, command))
        return 0, self.arguments.value_back(model.interrupts.mask, command)

    def _reset(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: Command) -> tuple[int, bytes]:
        self.check_change(ipu, fh, "reset it")
        self.devices.ipus[ipu].reset()
        log.info("IPU %d reset (by thread %d)", ipu, tgid)
        return 0, b""

    # --- attachments ------------------------------------------------------------
    def detach(self, ipu: int, reason: str, pidfd: int | None = None) -> None:
        att = self.attachments.get(ipu)
        if att is None or (pidfd is not None and att.pidfd != pidfd):
            return
        self.attachments.remove(ipu)
        self.exits.unwatch(att.pidfd)  # closes it, in the watcher's own time
        att.pidfd = -1
        self.devices.ipus[ipu].clear_interrupts()
        log.info("IPU %d detached from process %d: %s", ipu, att.pid, reason)
        if self.tracer.enabled:
            self.tracer.emit(events.Detached(ipu, att.pid, reason))

    # --- device side -----------------------------------------------------------
    def raise_interrupt(self, ipu: int, source: Interrupt) -> None:
        """The device raises ``source`` on IPU ``ipu`` (the fault and test
        API; the model raises interrupts the same way)."""
        self.devices.ipus[ipu].raise_interrupt(source)

    def close(self) -> None:
        for att in self.attachments:
            self.detach(att.ipu, "the daemon stopped")


#: The driver's side of the ioctl table: for each ioctl of ipufs/abi/ioctls.py
#: (numbers, encodings, needs a writable open, docs), its handler, whether
#: the caller matters, the sizes it is served with, and whether it leaves
#: running tiles running. Adding an ioctl: a row there, a row here, a
#: handler above.
IOCTL_ROLES: dict[IoctlSpec, IoctlRole] = {
    abi.BY_NAME["ATTACH"]: IoctlRole(IpuDriver._attach, caller_matters=True, sizes=None),
    abi.BY_NAME["ATTACH_BUFFER"]: IoctlRole(
        buffer_ioctls.attach, caller_matters=True,
        sizes=Sizes((8,), abi.BUFFER.size, "a struct ipufs_buffer (32 bytes) or the real driver's struct (8)")),
    abi.BY_NAME["DETACH_BUFFER"]: IoctlRole(
        buffer_ioctls.detach, caller_matters=True,
        sizes=Sizes((0, 4), U64, "a buffer id: by value (size 0), a u32 or a u64")),
    abi.BY_NAME["BUFFER_DETACH_ALL"]: IoctlRole(buffer_ioctls.detach_all, caller_matters=True, sizes=None),
    abi.BY_NAME["SET_IPU_ID"]: IoctlRole(IpuDriver._set_ipu_id, caller_matters=True, sizes=None, leaves_tiles=True),
    abi.BY_NAME["MASK_INTERRUPT"]: IoctlRole(
        IpuDriver._mask, caller_matters=True,
        sizes=Sizes((0, 4), U64, "interrupt bits: by value (size 0), a u32 or a u64")),
    abi.BY_NAME["UNMASK_INTERRUPT"]: IoctlRole(
        IpuDriver._unmask, caller_matters=True,
        sizes=Sizes((0, 4), U64, "interrupt bits: by value (size 0), a u32 or a u64")),
    abi.BY_NAME["RESET"]: IoctlRole(IpuDriver._reset, caller_matters=False, sizes=None),
    abi.BY_NAME["STOP_MONITORING"]: IoctlRole(
        device_ioctls.stop_monitoring, caller_matters=False, sizes=None, leaves_tiles=True),
    abi.BY_NAME["START_MONITORING"]: IoctlRole(
        device_ioctls.start_monitoring, caller_matters=False, sizes=None, leaves_tiles=True),
    abi.BY_NAME["ACCUMULATE_ERRORS"]: IoctlRole(
        device_ioctls.accumulate_errors, caller_matters=False, sizes=None, leaves_tiles=True),
    abi.BY_NAME["SET_HEXOPT_IDENTITY_TABLE"]: IoctlRole(
        device_ioctls.set_hexopt_identity_table, caller_matters=False, sizes=None, leaves_tiles=True),
    abi.BY_NAME["SET_SECONDARY_IPU_ID"]: IoctlRole(
        device_ioctls.set_secondary_ipu_id, caller_matters=True,
        sizes=Sizes((0,), 4, "a u32: by value (size 0) or at the argument (4 bytes or more)"),
        leaves_tiles=True),
    # The mailbox ioctls serve any process that has a node of the IPU open,
    # as board management tools do not attach.
    abi.BY_NAME["MAILBOX_READ_ONLY"]: IoctlRole(
        mailbox_ioctls.read, caller_matters=False,
        sizes=Sizes((U64,), icu_message.size, "room for a message (20 bytes) or a u64 count"),
        fast=FastAnswer.MAILBOX_READ, leaves_tiles=True),
    abi.BY_NAME["MAILBOX_WRITE_ONLY"]: IoctlRole(
        mailbox_ioctls.write, caller_matters=False,
        sizes=Sizes((), icu_message.size, "a message of 5 x u32 (20 bytes)")),
    abi.BY_NAME["MAILBOX_WRITE_READ"]: IoctlRole(
        mailbox_ioctls.write_read, caller_matters=False,
        sizes=Sizes((U64,), icu_message.size, "a message of 5 x u32 (20 bytes) or two pointers (8)")),
    abi.BY_NAME["MAILBOX_GET_OFFSETS"]: IoctlRole(
        mailbox_ioctls.offsets, caller_matters=False, sizes=Sizes((), U64, "room for a u64 (or 16 bytes)"),
        fast=FastAnswer.MAILBOX_OFFSETS, leaves_tiles=True),
}
if set(IOCTL_ROLES) != set(abi.IOCTLS):  # fail at import, never silently
    raise ImportError(f"ioctls without a handler: {sorted(s.name for s in set(abi.IOCTLS) - set(IOCTL_ROLES))}")
