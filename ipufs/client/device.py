# One IPU as a host program sees it, through its device nodes: the whole of
# ipuN and ipuN_ex mapped, and the driver's ioctls (docs/abi.md).
from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from ipufs.abi import ioctls as abi
from ipufs.abi import icu
from ipufs.abi.elf import ElfImage
from ipufs.abi.nodes import node_name
from ipufs.client import execution
from ipufs.client.bars import bar_size
from ipufs.client.where import default_root
from ipufs.abi.registers import REGISTERS, TDI_REGISTER_WIDTH, TDI_TILE_STRIDE, TdiCommand, TdiResult

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
#: what a TDI command leaves in the aperture: DATA_LO, DATA_HI, TDI_RESULT (adjacent)
_TDI_ANSWER = struct.Struct("<3I")


class IoctlError(OSError):
    """An ioctl of the device failed; ``errno`` says why (docs/abi.md)."""


def icu_transfer(fd: int, request: tuple[int, ...]) -> tuple[int, ...]:
    """Send an ICU request through ``fd``, an open IPU node, and get its
    answer (MAILBOX_WRITE_READ). A request that only reads the board
    (READ_*) may go through a file opened read-only, as board management
    tools open it; one that changes it needs one opened for writing."""
    out = _ioctl(fd, "MAILBOX_WRITE_READ", icu.MESSAGE.pack(*request))
    return icu.MESSAGE.unpack(out)  # type: ignore[arg-type]


def _ioctl(fd: int, name: str, arg: bytes | int = 0, encoding: int = 0) -> bytes | int:
    spec = abi.BY_NAME[name]
    cmd = spec.encodings[encoding].cmd(spec.nr)
    try:
        if isinstance(arg, bytes):
            buf = bytearray(arg)
            fcntl.ioctl(fd, cmd, buf, True)
            return bytes(buf)
        return fcntl.ioctl(fd, cmd, arg)
    except OSError as exc:
        raise IoctlError(exc.errno, f"{name}: {os.strerror(exc.errno or 0)}") from exc


class Device:
    """Open ``root/ipuN`` and ``root/ipuN_ex`` and map the whole of each
    (``root``: default $IPUFS_MOUNT when set, else /dev)."""

    def __init__(self, index: int = 0, root: str | os.PathLike[str] | None = None) -> None:
        self.index = index
        base = Path(default_root() if root is None else root)
        self.fd = os.open(base / node_name(index), os.O_RDWR | os.O_CLOEXEC)
        try:
            self.ex_fd = os.open(base / node_name(index, "exchange"), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            os.close(self.fd)
            raise
        self.config = mmap.mmap(self.fd, bar_size(self.fd), mmap.MAP_SHARED)
        self.exchange = mmap.mmap(self.ex_fd, bar_size(self.ex_fd), mmap.MAP_SHARED)
        self._buffers: dict[int, object] = {}

    def attach(self) -> None:
        """Attach this process to the IPU (EBUSY: another process has it)."""
        _ioctl(self.fd, "ATTACH")

    def set_ipu_id(self, ipu_id: int) -> None:
        """The id sent back in si_int of every signal."""
        _ioctl(self.fd, "SET_IPU_ID", ipu_id)

    def mask(self, bits: int) -> int:
        """Mask interrupt sources; returns the mask in force."""
        return int(_U64.unpack(_ioctl(self.fd, "MASK_INTERRUPT", _U64.pack(bits)))[0])  # type: ignore[arg-type]

    def unmask(self, bits: int) -> int:
        """Unmask interrupt sources; returns the mask in force."""
        return int(_U64.unpack(_ioctl(self.fd, "UNMASK_INTERRUPT", _U64.pack(bits)))[0])  # type: ignore[arg-type]

    def reset(self) -> None:
        _ioctl(self.fd, "RESET", struct.pack("<i", 0))

    def attach_buffer(self, buffer: bytearray | memoryview, flags: int = 0) -> int:
        """Let the device read and write ``buffer`` (kept alive until
        detached); returns its id."""
        view = memoryview(buffer)
        if view.readonly or not view.contiguous or view.nbytes == 0:
            raise IoctlError(errno.EINVAL, "ATTACH_BUFFER needs a writable, contiguous, non-empty buffer")
        address = ctypes.addressof(ctypes.c_char.from_buffer(view))
        out = _ioctl(self.fd, "ATTACH_BUFFER", abi.BUFFER.pack(address, view.nbytes, 0, flags))
        buffer_id = int(abi.BUFFER.unpack(out)[2])  # type: ignore[arg-type]
        self._buffers[buffer_id] = view
        return buffer_id

    def detach_buffer(self, buffer_id: int) -> None:
        _ioctl(self.fd, "DETACH_BUFFER", _U64.pack(buffer_id))
        self._buffers.pop(buffer_id, None)

    # --- registers (config space, through pread/pwrite: synchronous) -------
    def read_register(self, name: str) -> int:
        return int.from_bytes(os.pread(self.fd, 4, REGISTERS[name].offset), "little")

    def write_register(self, name: str, value: int) -> None:
        """Store a register; a command has run when this returns."""
        os.pwrite(self.fd, (value & 0xFFFFFFFF).to_bytes(4, "little"), REGISTERS[name].offset)

    def window_start(self, tile: int) -> int:
        """Where ``tile``'s window (its SRAM, tile address TILE_MEM_BASE
        first) starts in ipuN_ex."""
        return self.read_register("TILE_EXCHANGE_BASE") + tile * self.read_register("TILE_WINDOW")

    def tile_register_offset(self, tile: int, reg: int) -> int:
        """Where TDI register ``reg`` of ``tile`` is in ipuN (profiles with
        per-tile TDI registers: TILE_TDI_BASE non-zero; OSError ENODEV else)."""
        base = self.read_register("TILE_TDI_BASE")
        if not base:
            raise OSError(errno.ENODEV, "this IPU has no per-tile TDI registers: use the TDI aperture")
        return base + tile * TDI_TILE_STRIDE + reg * TDI_REGISTER_WIDTH

    def read_tile_register(self, tile: int, reg: int) -> int:
        """A per-tile TDI register, by pread (docs/registers.md)."""
        return int.from_bytes(os.pread(self.fd, 4, self.tile_register_offset(tile, reg)), "little")

    def write_tile_register(self, tile: int, reg: int, value: int) -> None:
        """Store a per-tile TDI register by pwrite: the TDI's WRITE_REG,
        done when this returns (a DBG_IEXEC accepted: it has retired once
        the tile's TDI_STS reads BUSY clear); a refusal raises OSError with
        the errno of docs/registers.md (EBUSY, EOPNOTSUPP, EINVAL, ERANGE,
        EIO: also a DBG_IEXEC while the last is BUSY)."""
        os.pwrite(self.fd, (value & 0xFFFFFFFF).to_bytes(4, "little"), self.tile_register_offset(tile, reg))

    def load_elf(self, data: bytes | ElfImage, tiles: Iterable[int] | None = None) -> int:
        """Load an elf32-colossus file's segments (from its bytes, or from
        the image ipufs.abi.elf.read_elf made of them) into ``tiles``
        (default all) through their exchange BAR windows; returns the bytes
        written per tile. LoadError or ElfError, with nothing written, when a
        segment breaks the tile memory rules (docs/isa.md, "Loading")."""
        from ipufs.client.loader import load_elf

        return sum(len(p.data) for p in load_elf(self, data, tiles))

    def start(self, entry: int, tiles: Iterable[int], context: int = 0) -> None:
        """Start tile code at ``entry`` on ``context`` (0: the supervisor)
        of ``tiles``, through the TDI (ipufs/client/execution.py)."""
        execution.start(self, entry, tiles, context)

    def sync(self, zone: int) -> None:
        """Request a sync on ``zone`` (CMD_SYNC); completion is a signal."""
        self.write_register("CMD_SYNC", zone)

    # --- the tile debug interface ---------------------------------------------
    def _tdi(self, command: TdiCommand, tile: int, **fields: int) -> tuple[TdiResult, int]:
        """One TDI command through the aperture: its fields stored, one
        pwrite per run of adjacent registers, then CMD_TDI, then DATA_LO,
        DATA_HI and TDI_RESULT read in one pread (_TDI_ANSWER)."""
        stores = sorted((REGISTERS[f"TDI_{name.upper()}"].offset, value) for name, value in fields.items())
        start, run = REGISTERS["TDI_TILE"].offset, bytearray(_U32.pack(tile & 0xFFFFFFFF))
        for offset, value in stores:
            if offset != start + len(run):
                os.pwrite(self.fd, run, start)
                start, run = offset, bytearray()
            run += _U32.pack(value & 0xFFFFFFFF)
        os.pwrite(self.fd, run, start)
        self.write_register("CMD_TDI", command)
        lo, hi, result = _TDI_ANSWER.unpack(os.pread(self.fd, _TDI_ANSWER.size, REGISTERS["TDI_DATA_LO"].offset))
        return TdiResult(result), lo | hi << 32

    def tdi_read_memory(self, tile: int, address: int, width: int = 8) -> tuple[TdiResult, int]:
        return self._tdi(TdiCommand.READ_MEM, tile, address=address, width=width)

    def tdi_write_memory(self, tile: int, address: int, value: int, width: int = 8) -> TdiResult:
        return self._tdi(TdiCommand.WRITE_MEM, tile, address=address, width=width,
                         data_lo=value & 0xFFFFFFFF, data_hi=value >> 32)[0]

    def tdi_read_register(self, tile: int, reg: int) -> tuple[TdiResult, int]:
        return self._tdi(TdiCommand.READ_REG, tile, reg=reg)

    def tdi_write_register(self, tile: int, reg: int, value: int) -> TdiResult:
        return self._tdi(TdiCommand.WRITE_REG, tile, reg=reg, data_lo=value & 0xFFFFFFFF,
                         data_hi=value >> 32)[0]

    # --- the ICU, by ioctl ------------------------------------------------------
    def icu_transfer(self, request: tuple[int, ...]) -> tuple[int, ...]:
        """Send a request and get its answer (MAILBOX_WRITE_READ)."""
        return icu_transfer(self.fd, request)

    def icu_send(self, request: tuple[int, ...]) -> None:
        """Send a request; its answer is queued and rings the doorbell."""
        _ioctl(self.fd, "MAILBOX_WRITE_ONLY", icu.MESSAGE.pack(*request))

    def icu_receive(self) -> tuple[int, ...] | None:
        """The next queued answer, or None (MAILBOX_READ_ONLY)."""
        try:
            out = _ioctl(self.fd, "MAILBOX_READ_ONLY", bytes(icu.MESSAGE.size))
        except IoctlError as exc:
            if exc.errno == errno.EAGAIN:
                return None
            raise
        return icu.MESSAGE.unpack(out)  # type: ignore[arg-type]

    def close(self) -> None:
        """Unmap and close: the last close of the IPU's files detaches."""
        self._buffers.clear()
        for m in (self.config, self.exchange):
            m.close()
        for fd in (self.fd, self.ex_fd):
            os.close(fd)

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
