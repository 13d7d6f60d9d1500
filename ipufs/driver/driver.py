# The PCIe driver personality: the 0xED ioctls, attachments, interrupts as
# real-time signals through pidfds, and DMA into attached buffers with
# process_vm_readv/writev. docs/abi.md has every ioctl and errno.
from __future__ import annotations

import errno
import logging
import os
import signal
import struct
from collections.abc import Callable
from typing import NamedTuple, Protocol, TypeVar

from ipufs import native
from ipufs.abi import ioctls as abi
from ipufs.driver import procs
from ipufs.abi.ioctls import Dir, Encoding
from ipufs.driver.attachments import Attachment, AttachmentTable, Buffer
from ipufs.driver.devices import DeviceSet
from ipufs.driver.events import EventSink, NoEvents
from ipufs.fuse.errors import FUSEError
from ipufs.abi import icu
from ipufs.abi.icu import MESSAGE as icu_message
from ipufs.abi.interrupts import ALL_SOURCES, FIRST_SIGNAL, SIGNAL_NAMES, Interrupt

log = logging.getLogger(__name__)
T = TypeVar("T")

U64 = 8
#: An ioctl's argument bytes: a view of the request buffer, valid only
#: while the request is handled.
Arg = bytes | memoryview


#: The ioctls whose meaning depends on which process asks.
_CALLER_MATTERS = frozenset({"ATTACH", "SET_IPU_ID", "ATTACH_BUFFER", "DETACH_BUFFER", "MASK_INTERRUPT",
                             "UNMASK_INTERRUPT"})


class Watcher(Protocol):
    def watch(self, pidfd: int, on_exit: Callable[[], None]) -> None: ...

    def unwatch(self, pidfd: int) -> None: ...


class DmaError(Exception):
    """Raised by the device-side DMA calls: no attachment, an unknown
    buffer, a range outside it, or an address the process does not map."""


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


def _alive(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` has not been reaped (so its pid
    cannot have been given to another process). Signal 0 only checks."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists; we may not signal it
    return True


def _as_int32(value: int) -> int:
    """An ioctl argument as a C int: a 32-bit value, signed or unsigned, or
    a negative int sign-extended to 64 bits."""
    if value >= 1 << 63:
        value -= 1 << 64
    if -(1 << 31) <= value < 1 << 32:
        return value - (1 << 32) if value >= 1 << 31 else value
    raise FUSEError(errno.EINVAL, "SET_IPU_ID takes an int")


class _Command(NamedTuple):
    handler: Callable[[int, int, int, int, Arg, int], tuple[int, bytes]]
    caller_matters: bool
    needs_write: bool
    writes: bool
    reads: bool
    size: int


class IpuDriver:
    def __init__(
        self,
        devices: DeviceSet,
        *,
        send_signal: Callable[[int, int, int], None] = native.pidfd_send_value,
        events: EventSink | None = None,
    ) -> None:
        self.devices = devices
        self.tracer: EventSink = events if events is not None else NoEvents()
        self.attachments = AttachmentTable()
        self.watcher: Watcher | None = None
        self.send_signal = send_signal
        self.signals_sent = [dict.fromkeys(Interrupt, 0) for _ in devices.ipus]
        self.signals_dropped = [dict.fromkeys(Interrupt, 0) for _ in devices.ipus]
        handlers = {
            "ATTACH": self._attach,
            "ATTACH_BUFFER": self._attach_buffer,
            "DETACH_BUFFER": self._detach_buffer,
            "SET_IPU_ID": self._set_ipu_id,
            "MASK_INTERRUPT": self._mask,
            "UNMASK_INTERRUPT": self._unmask,
            "RESET": self._reset,
            "MAILBOX_READ_ONLY": self._mailbox_read,
            "MAILBOX_WRITE_ONLY": self._mailbox_write,
            "MAILBOX_WRITE_READ": self._mailbox_write_read,
            "MAILBOX_GET_OFFSETS": self._mailbox_offsets,
        }
        # Command number -> everything serving it needs, found with one
        # dictionary lookup per request.
        self._commands: dict[int, _Command] = {
            cmd: _Command(handlers[spec.name], spec.name in _CALLER_MATTERS, spec.needs_write, writes, reads,
                          size)
            for cmd, (spec, writes, reads, size) in abi.ACCEPTED.items()
        }
        self._open: dict[int, tuple[int, int | None]] = {}  # fh -> (ipu, tgid)
        self._read_only: set[int] = set()  # file handles opened O_RDONLY

    # --- files ---------------------------------------------------------------
    def opened(self, fh: int, ipu: int, tgid: int | None, *, writable: bool = True) -> None:
        """A file of IPU ``ipu`` was opened by process ``tgid``. It does not
        join an attachment the process holds: the kernel may deliver this
        OPEN before the RELEASE of a file the process closed earlier, so
        only ATTACH through a file makes it hold the attachment (then
        closing every file detaches, whatever the order of the two)."""
        self._open[fh] = (ipu, tgid)
        if not writable:
            self._read_only.add(fh)

    def released(self, fh: int) -> None:
        self._read_only.discard(fh)
        ipu, _ = self._open.pop(fh, (None, None))
        att = self.attachments.get(ipu) if ipu is not None else None
        if att is not None and fh in att.handles:
            att.handles.discard(fh)
            if not att.handles:
                self.detach(att.ipu, "its last file was closed")

    # --- ioctls ----------------------------------------------------------------
    def ioctl(self, ipu: int, fh: int, pid: int, cmd: int, arg: int, data: Arg) -> tuple[int, bytes]:
        """Serve one ioctl of thread ``pid`` on IPU ``ipu``: returns the
        ioctl's result and the bytes to copy back to the caller. The
        interrupts it raises are the caller's to deliver (``deliver``)."""
        command = self._commands.get(cmd)
        if command is None:
            direction, type_, nr, size = abi.ioc_fields(cmd)
            if type_ == abi.IOCTL_TYPE and nr in abi.BY_NR:
                raise FUSEError(errno.EINVAL, f"{abi.BY_NR[nr].name} does not take "
                                              f"{Encoding(Dir(direction), size)}")
            raise FUSEError(errno.ENOTTY)
        handler, caller_matters, needs_write, writes, reads, size = command
        if writes and len(data) != size:
            raise FUSEError(errno.EINVAL, "argument shorter than its encoding")
        if needs_write and fh in self._read_only:
            raise FUSEError(errno.EBADF, "this ioctl needs a file opened for writing")
        if caller_matters:
            tgid = _starved_as_eagain(self._caller, ipu, pid)
            if tgid is None:
                raise FUSEError(errno.ESRCH, "the caller is gone")
        else:
            tgid = pid  # who asks does not matter: spare the /proc lookup
        result, out = handler(ipu, fh, tgid, arg, data, size)
        if not reads:
            return result, b""
        if len(out) != size:
            out = out.ljust(size, b"\0")[:size]
        return result, out

    def _caller(self, ipu: int, pid: int) -> int | None:
        """The thread group of calling thread ``pid``. The main thread of the
        attached process needs no /proc lookup: its pid is the group's, and
        the attachment's pidfd says whether that process still lives (so a
        recycled pid is not mistaken for it)."""
        att = self.attachments.get(ipu)
        if att is not None and att.pid == pid and _alive(att.pidfd):
            return pid
        return procs.tgid_of(pid)

    def _caller_attachment(self, ipu: int, tgid: int) -> Attachment:
        att = self.attachments.get(ipu)
        if att is None or att.pid != tgid:
            raise FUSEError(errno.EPERM, "only the attached process may do this")
        return att

    def check_attached(self, ipu: int, pid: int) -> None:
        """Refuse (EPERM) unless thread ``pid`` belongs to the process
        attached to IPU ``ipu``: the rule of MASK/UNMASK_INTERRUPT, which a
        pwrite of INT_MASK follows too."""
        tgid = self._caller(ipu, pid)
        if tgid is None:
            raise FUSEError(errno.ESRCH, "the caller is gone")
        self._caller_attachment(ipu, tgid)

    def _attach(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        att = self.attachments.get(ipu)
        if att is not None and not _alive(att.pidfd):
            self.detach(ipu, "its process exited")
            att = None
        if att is not None:
            if att.pid != tgid:
                raise FUSEError(errno.EBUSY, f"IPU {ipu} is attached to process {att.pid}")
            att.handles.add(fh)
            return 0, b""
        try:
            pidfd = _starved_as_eagain(os.pidfd_open, tgid)
        except OSError as exc:
            raise FUSEError(errno.ESRCH, "the caller is gone") from exc
        handles = {h for h, (i, t) in self._open.items() if i == ipu and t == tgid} | {fh}
        att = Attachment(ipu=ipu, pid=tgid, pidfd=pidfd, ipu_id=ipu, handles=handles)
        self.attachments.add(att)
        self.devices.ipus[ipu].clear_interrupts()
        if self.watcher is not None:
            self.watcher.watch(pidfd, lambda: self.detach(ipu, "its process exited", pidfd))
        log.info("IPU %d attached to process %d", ipu, tgid)
        if self.tracer.enabled:
            self.tracer.emit("attach", ipu, pid=tgid, command=procs.command_of(tgid))
        return 0, b""

    def _set_ipu_id(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        att = self._caller_attachment(ipu, tgid)
        att.ipu_id = _as_int32(arg)
        return 0, b""

    def _attach_buffer(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        att = self._caller_attachment(ipu, tgid)
        address, length, _, flags = abi.BUFFER.unpack(data)
        if flags & ~(abi.BUFFER_DEVICE_READS | abi.BUFFER_DEVICE_WRITES):
            raise FUSEError(errno.EINVAL, "unknown buffer flags")
        if not 0 < length <= abi.MAX_BUFFER_LENGTH or address + length > 1 << 64:
            raise FUSEError(errno.EINVAL, f"buffer length must be 1..{abi.MAX_BUFFER_LENGTH}")
        if len(att.buffers) >= abi.MAX_BUFFERS:
            raise FUSEError(errno.ENOSPC, f"at most {abi.MAX_BUFFERS} buffers per attachment")
        for probe in (address, address + length - 1):
            try:
                native.vm_read(att.pid, probe, 1)
            except OSError as exc:
                raise FUSEError(errno.EFAULT, "the buffer is not mapped by the caller") from exc
        buffer = Buffer(att.next_buffer_id, address, length, flags or 3)
        att.next_buffer_id += 1
        att.buffers[buffer.id] = buffer
        return 0, abi.BUFFER.pack(address, length, buffer.id, flags)

    def _detach_buffer(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        att = self._caller_attachment(ipu, tgid)
        (buffer_id,) = struct.unpack("<Q", data)
        if att.buffers.pop(buffer_id, None) is None:
            raise FUSEError(errno.EINVAL, f"no buffer {buffer_id}")
        return 0, b""

    def _mask_bits(self, data: Arg) -> int:
        (bits,) = struct.unpack("<Q", data)
        if bits & ~ALL_SOURCES:
            raise FUSEError(errno.EINVAL, "unknown interrupt source bits")
        return int(bits)

    def _mask(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        self._caller_attachment(ipu, tgid)
        model = self.devices.ipus[ipu]
        model.set_interrupt_mask(model.interrupts.mask | self._mask_bits(data))
        return 0, model.interrupts.mask.to_bytes(U64, "little")

    def _unmask(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        self._caller_attachment(ipu, tgid)
        model = self.devices.ipus[ipu]
        model.set_interrupt_mask(model.interrupts.mask & ~self._mask_bits(data))
        return 0, model.interrupts.mask.to_bytes(U64, "little")

    # The mailbox ioctls serve any process that has a node of the IPU open,
    # as board management tools do not attach.
    def _mailbox_read(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        icu = self.devices.ipus[ipu].icu
        if size == U64:
            return 0, icu.responses_waiting.to_bytes(U64, "little")
        response = icu.pop_response()
        if response is None:
            raise FUSEError(errno.EAGAIN, "no ICU response is waiting")
        return 0, icu_message.pack(*response)

    def _mailbox_write(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        self.devices.ipus[ipu].icu_submit(icu_message.unpack_from(data))
        return 0, b""

    def _mailbox_write_read(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        model = self.devices.ipus[ipu]
        if model.icu.unresponsive:
            raise FUSEError(errno.ETIMEDOUT, "the ICU does not answer")
        response = model.icu.handle(icu_message.unpack_from(data))
        return 0, icu_message.pack(*(response or (0, 0, 0, 0, 0)))

    def _mailbox_offsets(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        if size == U64:
            return 0, struct.pack("<II", icu.REQUEST_RING, icu.RESPONSE_RING)
        return 0, struct.pack("<IIII", icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING, icu.SLOTS)

    def _reset(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, size: int) -> tuple[int, bytes]:
        self.devices.ipus[ipu].reset()
        log.info("IPU %d reset (by thread %d)", ipu, tgid)
        return 0, b""

    # --- attachments and signals -------------------------------------------
    def detach(self, ipu: int, reason: str, pidfd: int | None = None) -> None:
        att = self.attachments.get(ipu)
        if att is None or (pidfd is not None and att.pidfd != pidfd):
            return
        self.attachments.remove(ipu)
        if self.watcher is not None:
            self.watcher.unwatch(att.pidfd)  # closes it, in the watcher's own time
            att.pidfd = -1
        else:
            att.close()
        self.devices.ipus[ipu].clear_interrupts()
        log.info("IPU %d detached from process %d: %s", ipu, att.pid, reason)
        if self.tracer.enabled:
            self.tracer.emit("detach", ipu, pid=att.pid, reason=reason)

    def deliver(self) -> None:
        """Send the signals of every interrupt the model made deliverable,
        IPU by IPU in index order."""
        deliverable = self.devices.deliverable
        while deliverable:
            index = min(deliverable)
            for source in self.devices.ipus[index].interrupts.take():  # takes index out
                att = self.attachments.get(index)
                if att is None:
                    self.signals_dropped[index][source] += 1
                    continue
                try:
                    self.send_signal(att.pidfd, FIRST_SIGNAL + source, att.ipu_id)
                except OSError as exc:
                    self.signals_dropped[index][source] += 1
                    if exc.errno == errno.ESRCH:
                        self.detach(index, "its process exited")
                    else:
                        log.warning("signal %d to process %d failed: %s", source.signal, att.pid, exc)
                    continue
                att.signals_sent += 1
                self.signals_sent[index][source] += 1
                if self.tracer.enabled:
                    self.tracer.emit("signal", index, pid=att.pid, signo=source.signal,
                                     name=SIGNAL_NAMES[source], si_int=att.ipu_id)

    # --- device side -----------------------------------------------------------
    def raise_interrupt(self, ipu: int, source: Interrupt) -> None:
        """The device raises ``source`` on IPU ``ipu`` (the fault and test
        API; the model raises interrupts the same way)."""
        self.devices.ipus[ipu].raise_interrupt(source)

    def _dma_target(self, ipu: int, buffer_id: int, offset: int, length: int, need: int) -> tuple[Attachment, Buffer]:
        att = self.attachments.get(ipu)
        if att is None:
            raise DmaError(f"IPU {ipu} has no attached process")
        buffer = att.buffers.get(buffer_id)
        if buffer is None:
            raise DmaError(f"IPU {ipu} has no buffer {buffer_id}")
        if not buffer.flags & need:
            raise DmaError(f"buffer {buffer_id} does not allow that direction")
        if offset < 0 or length < 0 or offset + length > buffer.length:
            raise DmaError(f"range {offset}+{length} is outside buffer {buffer_id} of {buffer.length} bytes")
        return att, buffer

    def dma_write(self, ipu: int, buffer_id: int, offset: int, data: bytes) -> None:
        """Device to host: store ``data`` into an attached buffer."""
        att, buffer = self._dma_target(ipu, buffer_id, offset, len(data), abi.BUFFER_DEVICE_WRITES)
        try:
            n = native.vm_write(att.pid, buffer.address + offset, data)
        except OSError as exc:
            raise DmaError(f"process {att.pid} does not map the buffer: {exc.strerror}") from exc
        if n != len(data):
            raise DmaError(f"short DMA write: {n} of {len(data)} bytes")

    def dma_read(self, ipu: int, buffer_id: int, offset: int, length: int) -> bytes:
        """Host to device: load ``length`` bytes from an attached buffer."""
        att, buffer = self._dma_target(ipu, buffer_id, offset, length, abi.BUFFER_DEVICE_READS)
        try:
            data = native.vm_read(att.pid, buffer.address + offset, length)
        except OSError as exc:
            raise DmaError(f"process {att.pid} does not map the buffer: {exc.strerror}") from exc
        if len(data) != length:
            raise DmaError(f"short DMA read: {len(data)} of {length} bytes")
        return data

    def close(self) -> None:
        for att in self.attachments:
            self.detach(att.ipu, "the daemon stopped")
