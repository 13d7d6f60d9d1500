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
from ipufs.abi.ioctls import Dir
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
    """One ioctl command number, decoded once: its handler, and what the
    kernel carries for it (FUSE's restricted ioctls copy ``_IOC_SIZE``
    bytes in for _IOW/_IOWR and back for _IOR/_IOWR, nothing otherwise)."""

    handler: Callable[[int, int, int, int, Arg, _Command], tuple[int, bytes]]
    caller_matters: bool
    needs_write: bool  # it changes the device: a file opened for writing
    size: int  # _IOC_SIZE
    carried_in: int  # bytes the kernel copied in from the argument
    carried_out: int  # bytes the kernel will copy back at most


#: What each ioctl needs of _IOC_SIZE, whatever the direction: None when any
#: size will do, else the sizes it serves (a tuple of exact sizes and a
#: minimum) and the complaint otherwise.
_SIZES: dict[str, tuple[tuple[int, ...], int, str] | None] = {
    "ATTACH": None,
    "SET_IPU_ID": None,
    "RESET": None,
    "ATTACH_BUFFER": ((8,), abi.BUFFER.size, "a struct ipufs_buffer (32 bytes) or a u64 holding its address"),
    "DETACH_BUFFER": ((0, 4), U64, "a buffer id: by value (size 0), a u32 or a u64"),
    "MASK_INTERRUPT": ((0, 4), U64, "interrupt bits: by value (size 0), a u32 or a u64"),
    "UNMASK_INTERRUPT": ((0, 4), U64, "interrupt bits: by value (size 0), a u32 or a u64"),
    "MAILBOX_READ_ONLY": ((U64,), icu_message.size, "room for a message (20 bytes) or a u64 count"),
    "MAILBOX_WRITE_ONLY": ((), icu_message.size, "a message of 5 x u32 (20 bytes)"),
    "MAILBOX_WRITE_READ": ((), icu_message.size, "a message of 5 x u32 (20 bytes)"),
    "MAILBOX_GET_OFFSETS": ((), U64, "room for a u64 (or 16 bytes)"),
}
#: Decoded commands kept at most (random numbers must not grow the cache).
_MAX_DECODED = 512


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
        self._handlers = handlers
        # Command number -> everything serving it needs, decoded on first
        # use: one dictionary lookup per request after that.
        self._commands: dict[int, _Command] = {}
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
            command = self._decode(cmd)
        if command.carried_in and len(data) != command.size:
            raise FUSEError(errno.EINVAL, "argument shorter than its encoding")
        if command.needs_write and fh in self._read_only:
            raise FUSEError(errno.EBADF, "this ioctl needs a file opened for writing")
        if command.caller_matters:
            tgid = _starved_as_eagain(self._caller, ipu, pid)
            if tgid is None:
                raise FUSEError(errno.ESRCH, "the caller is gone")
        else:
            tgid = pid  # who asks does not matter: spare the /proc lookup
        return command.handler(ipu, fh, tgid, arg, data, command)

    def _decode(self, cmd: int) -> _Command:
        """Match ``cmd`` on (type, nr) and take its size from _IOC_SIZE: any
        direction and any size the ioctl can be served with is accepted."""
        direction, type_, nr, size = abi.ioc_fields(cmd)
        spec = abi.BY_NR.get(nr) if type_ == abi.IOCTL_TYPE else None
        if spec is None:
            raise FUSEError(errno.ENOTTY)
        sizes = _SIZES[spec.name]
        if sizes is not None and size not in sizes[0] and size < sizes[1]:
            raise FUSEError(errno.EINVAL, f"{spec.name} takes {sizes[2]}, not {size} bytes")
        command = _Command(self._handlers[spec.name], spec.name in _CALLER_MATTERS, spec.needs_write, size,
                           size if direction & Dir.WRITE else 0, size if direction & Dir.READ else 0)
        if len(self._commands) < _MAX_DECODED:
            self._commands[cmd] = command
        return command

    # Where the kernel did not carry an argument (an _IOR that the driver
    # reads, an _IOW it answers in, a u64 holding an address), the daemon
    # reads and writes the caller's memory at the argument itself, as the
    # real driver's copy_from_user/copy_to_user would.
    @staticmethod
    def _peek(tgid: int, address: int, length: int) -> bytes:
        try:
            data = native.vm_read(tgid, address, length)
        except OSError as exc:
            raise FUSEError(errno.EFAULT, f"cannot read the argument: {exc.strerror}") from exc
        if len(data) != length:
            raise FUSEError(errno.EFAULT, "the argument is not wholly mapped")
        return data

    @staticmethod
    def _poke(tgid: int, address: int, data: bytes) -> None:
        try:
            n = native.vm_write(tgid, address, data)
        except OSError as exc:
            raise FUSEError(errno.EFAULT, f"cannot write the answer: {exc.strerror}") from exc
        if n != len(data):
            raise FUSEError(errno.EFAULT, "the argument is not wholly mapped")

    def _take(self, tgid: int, arg: int, data: Arg, command: _Command, length: int) -> Arg:
        """The first ``length`` bytes of the argument (the sizes were checked
        when the command was decoded)."""
        if command.carried_in >= length:
            return data[:length]
        return self._peek(tgid, arg, length)

    def _give(self, tgid: int, arg: int, answer: bytes, command: _Command) -> bytes:
        """Hand ``answer`` back in the argument: the kernel copies it for
        _IOR/_IOWR; otherwise it is written into the caller's memory here."""
        if command.carried_out:
            return answer
        self._poke(tgid, arg, answer)
        return b""

    def _value(self, tgid: int, arg: int, data: Arg, command: _Command) -> int:
        """An integer argument: the argument value itself for size 0, else
        the u32 or u64 it points at."""
        if command.size == 0:
            return arg & 0xFFFF_FFFF_FFFF_FFFF
        if command.size == 4:
            return int(struct.unpack("<I", self._take(tgid, arg, data, command, 4))[0])
        return int(struct.unpack("<Q", self._take(tgid, arg, data, command, U64))[0])

    @staticmethod
    def _value_back(value: int, command: _Command) -> bytes:
        """An integer answer, for the encodings that read one back."""
        if not command.carried_out:
            return b""
        width = 4 if command.size == 4 else U64
        return (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")

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

    def _attach(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
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

    def _set_ipu_id(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        att = self._caller_attachment(ipu, tgid)
        att.ipu_id = _as_int32(arg)
        return 0, b""

    def _attach_buffer(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        att = self._caller_attachment(ipu, tgid)
        if command.size == U64:
            # A u64 holding the address of the struct (ipufs's reading of
            # the 8-byte encoding): the struct is read and its id written
            # in the caller's memory, and the id comes back in the u64.
            where = self._value(tgid, arg, data, command)
            buffer = self._new_buffer(att, self._peek(tgid, where, abi.BUFFER.size))
            self._poke(tgid, where + 16, buffer.id.to_bytes(U64, "little"))
            out = self._value_back(buffer.id, command)
        else:
            raw = bytes(self._take(tgid, arg, data, command, abi.BUFFER.size))
            buffer = self._new_buffer(att, raw)
            out = self._give(tgid, arg, raw[:16] + buffer.id.to_bytes(U64, "little") + raw[24:], command)
        att.next_buffer_id += 1
        att.buffers[buffer.id] = buffer
        return 0, out

    def _new_buffer(self, att: Attachment, raw: Arg) -> Buffer:
        """The buffer ``raw`` (a struct ipufs_buffer) describes, checked, with
        the attachment's next id; registered by the caller once its id is
        handed back."""
        address, length, _, flags = abi.BUFFER.unpack(raw)
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
        return Buffer(att.next_buffer_id, address, length, flags or 3)

    def _detach_buffer(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        att = self._caller_attachment(ipu, tgid)
        buffer_id = self._value(tgid, arg, data, command)
        if att.buffers.pop(buffer_id, None) is None:
            raise FUSEError(errno.EINVAL, f"no buffer {buffer_id}")
        return 0, b""

    def _mask_bits(self, tgid: int, arg: int, data: Arg, command: _Command) -> int:
        bits = self._value(tgid, arg, data, command)
        if bits & ~ALL_SOURCES:
            raise FUSEError(errno.EINVAL, "unknown interrupt source bits")
        return bits

    def _mask(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        self._caller_attachment(ipu, tgid)
        model = self.devices.ipus[ipu]
        model.set_interrupt_mask(model.interrupts.mask | self._mask_bits(tgid, arg, data, command))
        return 0, self._value_back(model.interrupts.mask, command)

    def _unmask(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        self._caller_attachment(ipu, tgid)
        model = self.devices.ipus[ipu]
        model.set_interrupt_mask(model.interrupts.mask & ~self._mask_bits(tgid, arg, data, command))
        return 0, self._value_back(model.interrupts.mask, command)

    # The mailbox ioctls serve any process that has a node of the IPU open,
    # as board management tools do not attach.
    def _mailbox_read(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        icu = self.devices.ipus[ipu].icu
        if command.size == U64:
            return 0, self._give(tgid, arg, icu.responses_waiting.to_bytes(U64, "little"), command)
        if not icu.responses_waiting:
            raise FUSEError(errno.EAGAIN, "no ICU response is waiting")
        if not command.carried_out:
            self._poke(tgid, arg, bytes(icu_message.size))  # never lose a response to a bad pointer
        response = icu.pop_response()
        assert response is not None
        return 0, self._give(tgid, arg, icu_message.pack(*response), command)

    def _mailbox_write(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        request = icu_message.unpack_from(self._take(tgid, arg, data, command, icu_message.size))
        self.devices.ipus[ipu].icu_submit(request)
        return 0, b""

    def _mailbox_write_read(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        model = self.devices.ipus[ipu]
        request = icu_message.unpack_from(self._take(tgid, arg, data, command, icu_message.size))
        if model.icu.unresponsive:
            raise FUSEError(errno.ETIMEDOUT, "the ICU does not answer")
        response = model.icu.handle(request)
        # With _IOW (how aspen-sdk calls it) the answer still comes back in
        # the caller's buffer, as the real driver writes it there.
        return 0, self._give(tgid, arg, icu_message.pack(*(response or (0, 0, 0, 0, 0))), command)

    def _mailbox_offsets(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
        if command.size < 16:
            return 0, self._give(tgid, arg, struct.pack("<II", icu.REQUEST_RING, icu.RESPONSE_RING), command)
        return 0, self._give(tgid, arg, struct.pack("<IIII", icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING,
                                                    icu.SLOTS), command)

    def _reset(self, ipu: int, fh: int, tgid: int, arg: int, data: Arg, command: _Command) -> tuple[int, bytes]:
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
