# Loading tile code: the PT_LOAD segments of an elf32-colossus file into
# the memory of chosen tiles, through each tile's window of the exchange
# BAR (ipuN_ex: tile T's SRAM at TILE_EXCHANGE_BASE + T * TILE_WINDOW, tile
# address TILE_MEM_BASE at its start). The checks are the model's tile memory
# rules (ipufs/model/tiles.py) read from the config space registers: the
# populated addresses are TILE_MEM_BASE .. + SRAM_PER_TILE, region 0 (where
# code is fetched from, and only there) TILE_MEM_BASE .. TILE_CODE_END. Every segment and
# tile is checked before the first byte is written.
from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ipufs.abi import elf
from ipufs.abi.registers import ARCH_CODES


class Device(Protocol):
    """What loading needs of an opened IPU (ipufs.client.Device is one):
    its config space registers by name, and its exchange BAR's descriptor."""

    @property
    def ex_fd(self) -> int: ...

    def read_register(self, name: str) -> int: ...


class LoadError(ValueError):
    """An ELF that cannot be loaded as asked (one line saying why);
    nothing was written."""


@dataclass(frozen=True, slots=True)
class TileMemoryMap:
    """Where tile memory is, as the config space registers describe it."""

    arch: str
    tiles: int
    sram: int  # bytes per tile
    base: int  # first populated tile address
    window: int  # stride of a tile's window in ipuN_ex
    exchange_base: int = 0  # where tile 0's window starts in ipuN_ex
    code_end: int | None = None  # end of region 0 (TILE_CODE_END); None: half way through SRAM

    def window_start(self, tile: int) -> int:
        """Where ``tile``'s window starts in ipuN_ex."""
        return self.exchange_base + tile * self.window

    @property
    def end(self) -> int:
        return self.base + self.sram

    @property
    def region0_end(self) -> int:
        return self.base + self.sram // 2 if self.code_end is None else self.code_end

    @classmethod
    def of(cls, device: Device) -> TileMemoryMap:
        code = device.read_register("ARCH")
        arch = next((name for name, c in ARCH_CODES.items() if c == code), f"arch {code}")
        return cls(arch, device.read_register("TILE_COUNT"), device.read_register("SRAM_PER_TILE"),
                   device.read_register("TILE_MEM_BASE"), device.read_register("TILE_WINDOW"),
                   device.read_register("TILE_EXCHANGE_BASE"), device.read_register("TILE_CODE_END"))


@dataclass(frozen=True, slots=True)
class Placement:
    """One segment's bytes (zero-filled to its size in memory) and their
    offset in every tile's window."""

    offset: int
    data: bytes


def plan(image: elf.ElfImage, memory: TileMemoryMap, tiles: Sequence[int]) -> list[Placement]:
    """What to write where, or LoadError if any segment or tile breaks a rule."""
    if image.arch is not None and image.arch != memory.arch:
        raise LoadError(f"the file is {image.arch} code and this IPU is {memory.arch}: assemble it for "
                        f"{memory.arch} (`ipufs asm --arch {memory.arch}`, or `--dev DIR` to take the IPU's)")
    if not image.segments:
        raise LoadError("the file has no loadable segment")
    bad = [t for t in tiles if not 0 <= t < memory.tiles]
    if bad:
        raise LoadError(f"tile {bad[0]} does not exist (this IPU has tiles 0-{memory.tiles - 1})")
    out: list[Placement] = []
    for i, seg in enumerate(image.segments):
        start, end = seg.address, seg.address + seg.size
        where = f"segment {i} ({start:#x}-{end:#x})"
        if start < memory.base or end > memory.end:
            raise LoadError(f"{where} lies outside populated tile memory {memory.base:#x}-{memory.end:#x}")
        if seg.executable:
            if end > memory.region0_end:
                raise LoadError(f"{where} is code, and code must lie in region 0 "
                                f"({memory.base:#x}-{memory.region0_end:#x})")
            if start % 4:
                raise LoadError(f"{where} is code and does not start on a 4-byte boundary")
        for other in out:
            if other.offset < end - memory.base and start - memory.base < other.offset + len(other.data):
                raise LoadError(f"{where} overlaps another segment")
        out.append(Placement(start - memory.base, seg.data + bytes(seg.size - len(seg.data))))
    return out


def parse_tiles(text: str, count: int | None = None) -> list[int]:
    """``0-1215``, ``3``, ``0,2,5-9`` → tile numbers; ValueError otherwise."""
    tiles: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            lo, hi = int(first, 0), int(last, 0) if dash else int(first, 0)
        except ValueError:
            raise ValueError(f"tiles {text!r}: write them as 0-1215, 3 or 0,2,5-9") from None
        if lo > hi or lo < 0:
            raise ValueError(f"tiles {text!r}: {part.strip()} is not a range of tiles")
        tiles.extend(range(lo, hi + 1))
    if count is not None and tiles and max(tiles) >= count:
        raise ValueError(f"tile {max(tiles)} does not exist (tiles 0-{count - 1})")
    return tiles


def load_elf(device: Device, data: bytes | elf.ElfImage, tiles: Iterable[int] | None = None) -> list[Placement]:
    """Load an elf32-colossus file (its bytes, or the image elf.read_elf
    made of them, which a caller that needs the entry has already) into
    ``tiles`` (default: every tile) of ``device``; returns what was
    written to each tile. Raises LoadError (or elf.ElfError for a file
    that is no such ELF) before writing anything."""
    image = data if isinstance(data, elf.ElfImage) else elf.read_elf(data)
    memory = TileMemoryMap.of(device)
    chosen = list(range(memory.tiles)) if tiles is None else list(tiles)
    placements = plan(image, memory, chosen)
    for tile in chosen:
        at = memory.window_start(tile)
        for p in placements:
            # pwrite, not the mapping: a store the daemon sees at once in
            # either serving mode (passthrough or page cache).
            written = os.pwrite(device.ex_fd, p.data, at + p.offset)
            if written != len(p.data):
                raise OSError(errno.EIO, f"short write to tile {tile}: {written} of {len(p.data)} bytes")
    return placements


def _span(memory: TileMemoryMap, address: int, size: int) -> int:
    """The offset in a tile's window of ``size`` bytes at tile address
    ``address``; LoadError if they do not all lie in populated memory."""
    if size < 0 or address < memory.base or address + size > memory.end:
        raise LoadError(f"{size} bytes at {address:#x} do not lie in populated tile memory "
                        f"{memory.base:#x}-{memory.end:#x}")
    return address - memory.base


def write_memory(device: Device, tiles: Iterable[int], address: int, data: bytes) -> None:
    """Write ``data`` at tile address ``address`` of each of ``tiles``
    (their exchange BAR windows, by pwrite); LoadError before any write
    if it does not fit populated memory or a tile does not exist."""
    memory = TileMemoryMap.of(device)
    chosen = list(tiles)
    offset = _span(memory, address, len(data))
    bad = [t for t in chosen if not 0 <= t < memory.tiles]
    if bad:
        raise LoadError(f"tile {bad[0]} does not exist (this IPU has tiles 0-{memory.tiles - 1})")
    for tile in chosen:
        written = os.pwrite(device.ex_fd, data, memory.window_start(tile) + offset)
        if written != len(data):
            raise OSError(errno.EIO, f"short write to tile {tile}: {written} of {len(data)} bytes")


def read_memory(device: Device, tile: int, address: int, size: int) -> bytes:
    """``size`` bytes at tile address ``address`` of ``tile``."""
    memory = TileMemoryMap.of(device)
    offset = _span(memory, address, size)
    return os.pread(device.ex_fd, size, memory.window_start(tile) + offset)
