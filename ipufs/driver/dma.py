# DMA between a device and its attached process: the device side reads and
# writes the buffers the process registered with ATTACH_BUFFER, in the
# process's own memory, with process_vm_readv/writev (docs/abi.md,
# "Buffers"). Each transfer is checked against the buffer: its direction
# flags and its bounds.
from __future__ import annotations

from ipufs.abi import ioctls as abi
from ipufs.driver.attachments import Attachment, AttachmentTable, Buffer
from ipufs.driver.system import SystemCalls


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
