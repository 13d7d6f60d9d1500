# An ioctl's argument as the driver sees it. FUSE's restricted ioctls copy
# _IOC_SIZE bytes in for _IOW/_IOWR and back for _IOR/_IOWR, nothing
# otherwise (linux/fuse.h, fs/fuse/ioctl.c; docs/abi.md, "what the kernel
# does not carry"). Where the kernel carried nothing the handler needs (an
# _IOR the driver reads, an _IOW it answers in, a u64 holding an address),
# the daemon reads and writes the caller's memory at the argument itself,
# as the real driver's copy_from_user/copy_to_user would, with
# process_vm_readv/writev.
from __future__ import annotations

import errno
import struct
from collections.abc import Callable
from typing import NamedTuple

from ipufs.driver.system import SystemCalls
from ipufs.fuse.errors import FUSEError

U64 = 8
#: An ioctl's argument bytes: a view of the request buffer, valid only
#: while the request is handled.
Arg = bytes | memoryview


class Sizes(NamedTuple):
    """The _IOC_SIZE values an ioctl is served with: any of ``exact``, or
    ``minimum`` and more; ``complaint`` says so when another is given."""

    exact: tuple[int, ...]
    minimum: int
    complaint: str

    def allow(self, size: int) -> bool:
        return size in self.exact or size >= self.minimum


class Command(NamedTuple):
    """One ioctl command number, decoded once: its handler (bound), the
    columns of its row of the ioctl table, and what the kernel carries."""

    handler: Callable[[int, int, int, int, Arg, Command], tuple[int, bytes]]
    caller_matters: bool
    needs_write: bool  # it changes the device: a file opened for writing
    size: int  # _IOC_SIZE
    carried_in: int  # bytes the kernel copied in from the argument
    carried_out: int  # bytes the kernel will copy back at most


class Arguments:
    """Reads and writes ioctl arguments, in the request or in the caller."""

    def __init__(self, system: SystemCalls) -> None:
        self.system = system

    def peek(self, tgid: int, address: int, length: int) -> bytes:
        try:
            data = self.system.vm_read(tgid, address, length)
        except OSError as exc:
            raise FUSEError(errno.EFAULT, f"cannot read the argument: {exc.strerror}") from exc
        if len(data) != length:
            raise FUSEError(errno.EFAULT, "the argument is not wholly mapped")
        return data

    def poke(self, tgid: int, address: int, data: bytes) -> None:
        try:
            n = self.system.vm_write(tgid, address, data)
        except OSError as exc:
            raise FUSEError(errno.EFAULT, f"cannot write the answer: {exc.strerror}") from exc
        if n != len(data):
            raise FUSEError(errno.EFAULT, "the argument is not wholly mapped")

    def take(self, tgid: int, arg: int, data: Arg, command: Command, length: int) -> Arg:
        """The first ``length`` bytes of the argument (the sizes were checked
        when the command was decoded)."""
        if command.carried_in >= length:
            return data[:length]
        return self.peek(tgid, arg, length)

    def give(self, tgid: int, arg: int, answer: bytes, command: Command) -> bytes:
        """Hand ``answer`` back in the argument: the kernel copies it for
        _IOR/_IOWR; otherwise it is written into the caller's memory here."""
        if command.carried_out:
            return answer
        self.poke(tgid, arg, answer)
        return b""

    def value(self, tgid: int, arg: int, data: Arg, command: Command) -> int:
        """An integer argument: the argument value itself for size 0, else
        the u32 or u64 it points at."""
        if command.size == 0:
            return arg & 0xFFFF_FFFF_FFFF_FFFF
        if command.size == 4:
            return int(struct.unpack("<I", self.take(tgid, arg, data, command, 4))[0])
        return int(struct.unpack("<Q", self.take(tgid, arg, data, command, U64))[0])

    @staticmethod
    def value_back(value: int, command: Command) -> bytes:
        """An integer answer, for the encodings that read one back."""
        if not command.carried_out:
            return b""
        width = 4 if command.size == 4 else U64
        return (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")
