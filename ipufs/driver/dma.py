# DMA between a device and its attached process: the device side reads and
# writes the buffers the process registered with ATTACH_BUFFER, in the
# process's own memory, with process_vm_readv/writev (docs/abi.md,
# "Buffers"). Each transfer is checked against the buffer: its direction
# flags and its bounds. AttachedBuffers gives the model's host exchange
# packets the buffers as one host memory.
from __future__ import annotations

from ipufs.abi import ioctls as abi
from ipufs.driver.attachments import Attachment, AttachmentTable, Buffer
from ipufs.driver.system import SystemCalls
from ipufs.model.host_memory import HostRangeError


class DmaError(Exception):
    """Raised by the device-side DMA calls: no attachment, an unknown
    buffer, a range outside it, or an address the process does not map."""


class BufferDma:
    """The device side's transfers into and out of attached buffers."""

    def __init__(self, attachments: AttachmentTable, system: SystemCalls) -> None:
        self.attachments = attachments
        self.system = system

    def _target(self, ipu: int, buffer_id: int, offset: int, length: int, need: int) -> tuple[Attachment, Buffer]:
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

    def write(self, ipu: int, buffer_id: int, offset: int, data: bytes) -> None:
        """Device to host: store ``data`` into an attached buffer."""
        att, buffer = self._target(ipu, buffer_id, offset, len(data), abi.BUFFER_DEVICE_WRITES)
        try:
            n = self.system.vm_write(att.pid, buffer.address + offset, data)
        except OSError as exc:
            raise DmaError(f"process {att.pid} does not map the buffer: {exc.strerror}") from exc
        if n != len(data):
            raise DmaError(f"short DMA write: {n} of {len(data)} bytes")

    def read(self, ipu: int, buffer_id: int, offset: int, length: int) -> bytes:
        """Host to device: load ``length`` bytes from an attached buffer."""
        att, buffer = self._target(ipu, buffer_id, offset, length, abi.BUFFER_DEVICE_READS)
        try:
            data = self.system.vm_read(att.pid, buffer.address + offset, length)
        except OSError as exc:
            raise DmaError(f"process {att.pid} does not map the buffer: {exc.strerror}") from exc
        if len(data) != length:
            raise DmaError(f"short DMA read: {len(data)} of {length} bytes")
        return data


class AttachedBuffers:
    """The host's memory as IPU ``ipu``'s host exchange packets reach it
    (the model's HostMemory): the attached process's buffers laid end to
    end in attach order, a host offset a byte offset into them, as the
    C600's runtime lays out its BUFFER_ATTACH pages (osmarks/ipu-stack
    crates/ipu-codegen/src/host.rs; docs/exchange.md, "Host exchange").
    A range no buffer covers, or one a buffer's flags refuse, raises the
    model's HostRangeError."""

    def __init__(self, dma: BufferDma, ipu: int) -> None:
        self.dma = dma
        self.ipu = ipu

    def _pieces(self, offset: int, length: int) -> list[tuple[int, int, int]]:
        """(buffer id, offset in it, bytes) covering [offset, offset + length)."""
        att = self.dma.attachments.get(self.ipu)
        if att is None:
            raise HostRangeError(f"IPU {self.ipu} has no attached process")
        pieces, start, end = [], 0, offset + length
        for buffer in list(att.buffers.values()):
            lo, hi = max(offset, start), min(end, start + buffer.length)
            if lo < hi:
                pieces.append((buffer.id, lo - start, hi - lo))
            start += buffer.length
        if sum(n for _, _, n in pieces) != length:
            raise HostRangeError(f"the buffers attached to IPU {self.ipu} hold {start} bytes: none covers "
                                 f"host offset 0x{offset:x}+{length}")
        return pieces

    def read(self, offset: int, length: int) -> bytes:
        try:
            return b"".join(self.dma.read(self.ipu, b, at, n) for b, at, n in self._pieces(offset, length))
        except DmaError as exc:
            raise HostRangeError(str(exc)) from exc

    def write(self, offset: int, data: bytes) -> None:
        done = 0
        try:
            for b, at, n in self._pieces(offset, len(data)):
                self.dma.write(self.ipu, b, at, data[done:done + n])
                done += n
        except DmaError as exc:
            raise HostRangeError(str(exc)) from exc
