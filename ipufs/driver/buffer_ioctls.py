# The buffer ioctls (ATTACH_BUFFER, DETACH_BUFFER, BUFFER_DETACH_ALL;
# docs/abi.md): the attached process lends the device buffers of its own
# memory, which the device then reads and writes by DMA (dma.py). Two
# forms of ATTACH_BUFFER are served: ipufs's struct ipufs_buffer, whose id
# the driver assigns and writes back, and the real driver's BUFFER_ATTACH
# (osmarks/ipu-stack, crates/ipu-driver/src/lib.rs): _IOWR size 8 whose
# argument points at {u32 index; u32 size; u64 address}, the index the
# caller's choice. The kernel carries only its first 8 bytes, so the
# daemon reads the struct in the caller's memory, as the real driver's
# copy_from_user does. Each is a handler of the driver's ioctl table
# (driver.IOCTL_ROLES) over what it uses of the driver.
from __future__ import annotations

import errno
from typing import Protocol

from ipufs.abi import ioctls as abi
from ipufs.driver.arguments import U64, Arg, Arguments, Command
from ipufs.driver.attachments import Attachment, Buffer
from ipufs.driver.system import SystemCalls
from ipufs.fuse.errors import FUSEError


class BufferDriver(Protocol):
    """What the buffer ioctls use of the driver."""

    @property
    def arguments(self) -> Arguments: ...

    @property
    def system(self) -> SystemCalls: ...

    def caller_attachment(self, ipu: int, tgid: int) -> Attachment: ...


def attach(driver: BufferDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
           command: Command) -> tuple[int, bytes]:
    """ATTACH_BUFFER: ipufs's struct (id assigned and written back) or,
    with 8 bytes, the real driver's (index chosen by the caller)."""
    att = driver.caller_attachment(ipu, tgid)
    arguments = driver.arguments
    if command.size == U64:
        index, length, address = abi.REAL_BUFFER.unpack(arguments.peek(tgid, arg, abi.REAL_BUFFER.size))
        if index in att.buffers:
            raise FUSEError(errno.EBUSY, f"buffer index {index} is attached already")
        att.buffers[index] = _checked(driver, att, Buffer(index, address, length, 0))
        return 0, b""
    raw = bytes(arguments.take(tgid, arg, data, command, abi.BUFFER.size))
    address, length, _, flags = abi.BUFFER.unpack(raw)
    if flags & ~(abi.BUFFER_DEVICE_READS | abi.BUFFER_DEVICE_WRITES):
        raise FUSEError(errno.EINVAL, "unknown buffer flags")
    while att.next_buffer_id in att.buffers:  # an index a real-form caller chose
        att.next_buffer_id += 1
    buffer = _checked(driver, att, Buffer(att.next_buffer_id, address, length, flags))
    out = arguments.give(tgid, arg, raw[:16] + buffer.id.to_bytes(U64, "little") + raw[24:], command)
    att.next_buffer_id += 1
    att.buffers[buffer.id] = buffer
    return 0, out


def _checked(driver: BufferDriver, att: Attachment, buffer: Buffer) -> Buffer:
    """``buffer``, once its length, the attachment's room and the caller's
    memory allow it (flags 0: the device reads and writes)."""
    if not 0 < buffer.length <= abi.MAX_BUFFER_LENGTH or buffer.address + buffer.length > 1 << 64:
        raise FUSEError(errno.EINVAL, f"buffer length must be 1..{abi.MAX_BUFFER_LENGTH}")
    if len(att.buffers) >= abi.MAX_BUFFERS:
        raise FUSEError(errno.ENOSPC, f"at most {abi.MAX_BUFFERS} buffers per attachment")
    for probe in (buffer.address, buffer.address + buffer.length - 1):
        try:
            driver.system.vm_read(att.pid, probe, 1)
        except OSError as exc:
            raise FUSEError(errno.EFAULT, "the buffer is not mapped by the caller") from exc
    buffer.flags = buffer.flags or abi.BUFFER_DEVICE_READS | abi.BUFFER_DEVICE_WRITES
    return buffer


def detach(driver: BufferDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
           command: Command) -> tuple[int, bytes]:
    """DETACH_BUFFER: by id or index (a value with size 0, else a u32/u64
    it points at)."""
    att = driver.caller_attachment(ipu, tgid)
    buffer_id = driver.arguments.value(tgid, arg, data, command)
    if att.buffers.pop(buffer_id, None) is None:
        raise FUSEError(errno.EINVAL, f"no buffer {buffer_id}")
    return 0, b""


def detach_all(driver: BufferDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
               command: Command) -> tuple[int, bytes]:
    """BUFFER_DETACH_ALL: every buffer of the attachment goes."""
    driver.caller_attachment(ipu, tgid).buffers.clear()
    return 0, b""
