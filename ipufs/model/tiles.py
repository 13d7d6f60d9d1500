# Tile memory and its address rules, as docs/registers.md states them:
# - a tile address is an unsigned 21-bit number;
# - GC2 (ipu1), by Graphcore's IPU programmer's guide: memory is populated
#   from BASE = WINDOW (0x40000) for SRAM bytes, and any address aliases
#   onto it: offset = addr mod WINDOW (the guide's "mask off the upper bits
#   starting at bit 18"); region 1 from SRAM/2 (bit 17);
# - GC200 (ipu2, ipu21), as a runtime that drives a real C600 has it
#   (osmarks/ipu-stack, crates/ipu-target/src/memory.rs): memory is
#   0x4c000..0xe8000, code runs below 0x80000, region 1 (interleaved) is
#   0x80000 on; an address outside memory is no memory (a load or store
#   there faults: ipufs's rule, from that runtime's range checks);
# - each region has eight 64-bit banks; region 0 banks are contiguous,
#   region 1 banks are interleaved by address bit 3 (odd/even 64-bit words);
# - loads and stores must be naturally aligned.
# A tile's SRAM lives in the exchange BAR at EXCHANGE_BASE + tile * WINDOW
# (tile-major; logical tile T is window instance T: docs/registers.md).
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile

ADDRESS_BITS = 21
WORD = 8  # parity is kept per 64-bit word
WIDTHS = (1, 2, 4, 8, 16)
BANKS_PER_REGION = 8


@dataclass(frozen=True, slots=True)
class Location:
    offset: int  # byte offset in the tile's SRAM
    region: int  # 0 or 1
    bank: int  # 0..7 within the region


class MisalignedAccess(Exception):
    """A load or store whose address is not a multiple of its width."""


class NoMemory(ValueError):
    """An address outside the tile memory of a profile that does not alias."""


class TileMemory:
    """Every tile's SRAM, viewed through the exchange BAR."""

    def __init__(self, profile: Profile, exchange: BarMemory) -> None:
        self.profile = profile
        self.window = profile.tile_window
        self.sram = profile.sram_per_tile
        self.base = profile.tile_memory_base
        #: the tile address where region 1 starts (code is fetched below it)
        self.region1 = profile.region1_start
        self.aliasing = profile.aliasing
        #: where tile 0's window starts in the exchange BAR
        self.exchange_base = profile.exchange_tile_base
        self.exchange = exchange
        self.bad_parity: set[tuple[int, int]] = set()  # (tile, word offset)

    def offset(self, address: int) -> int | None:
        """The byte of a tile's SRAM ``address`` lands on, or None where
        there is no memory."""
        if self.aliasing:
            return (address & ((1 << ADDRESS_BITS) - 1)) % self.window % self.sram
        offset = address - self.base
        return offset if 0 <= offset < self.sram else None

    def locate(self, address: int) -> Location:
        """Where ``address`` lands in a tile's SRAM (NoMemory outside it)."""
        offset = self.offset(address)
        if offset is None:
            raise NoMemory(f"0x{address:x} is not tile memory (0x{self.base:x}..0x{self.base + self.sram:x})")
        split = self.region1 - self.base
        region = 1 if offset >= split else 0
        within, size = (offset - split, self.sram - split) if region else (offset, split)
        if region == 0:
            bank = within * BANKS_PER_REGION // size
        else:
            pair = within * (BANKS_PER_REGION // 2) // size
            bank = pair * 2 + ((offset >> 3) & 1)
        return Location(offset, region, bank)

    def canonical(self, address: int) -> int:
        """The populated address ``address`` aliases to."""
        return self.base + self.locate(address).offset

    @staticmethod
    def check_alignment(address: int, width: int) -> None:
        if width not in WIDTHS:
            raise ValueError(f"access width {width} is not one of {WIDTHS}")
        if address % width:
            raise MisalignedAccess(f"{width}-byte access at 0x{address:x}")

    def conflict(self, a: int, b: int) -> bool:
        """True when two 64-bit accesses hit the same bank and so cannot be
        made in the same cycle."""
        la, lb = self.locate(a), self.locate(b)
        return (la.region, la.bank) == (lb.region, lb.bank)

    def window_start(self, tile: int) -> int:
        """Where ``tile``'s window starts in the exchange BAR."""
        if not 0 <= tile < self.profile.tiles:
            raise IndexError(f"tile {tile} of {self.profile.tiles}")
        return self.exchange_base + tile * self.window

    def _exchange_offset(self, tile: int, offset: int) -> int:
        return self.window_start(tile) + offset

    def read(self, tile: int, address: int, width: int) -> bytes:
        """A naturally aligned load; raises MisalignedAccess. Parity is the
        caller's business (see bad_word)."""
        self.check_alignment(address, width)
        offset = self.locate(address).offset
        return self.exchange.read(self._exchange_offset(tile, offset), width)

    def write(self, tile: int, address: int, data: bytes) -> None:
        """A naturally aligned store; writing a word recomputes its parity,
        so a store clears a bad-parity mark on the words it touches."""
        self.check_alignment(address, len(data))
        offset = self.locate(address).offset
        self.exchange.write(self._exchange_offset(tile, offset), data)
        for word in range(offset - offset % WORD, offset + len(data), WORD):
            self.bad_parity.discard((tile, word))

    def read_words(self, tile: int, address: int, count: int) -> NDArray[np.uint32]:
        """``count`` words from ``address`` on (a send's source: 4-byte
        aligned, within memory), as a copy."""
        start = self._exchange_offset(tile, self.locate(address).offset) >> 2
        return self.exchange.words[start:start + count].copy()

    def write_words(self, tile: int, address: int, words: NDArray[np.uint32]) -> None:
        """Words stored from ``address`` on (the exchange's incoming
        stores, the autoloader's image: 4-byte aligned, within memory);
        parity marks there go."""
        offset = self.locate(address).offset
        self.exchange.write(self._exchange_offset(tile, offset), words.tobytes())
        self._unmark(tile, offset - offset % WORD, offset + 4 * len(words))

    @property
    def wants_stores(self) -> bool:
        """Whether stored() has anything to do: dirty pages are tracked, or
        a parity mark exists."""
        return bool(self.bad_parity) or self.exchange.track_dirty

    def stored(self, tile: int, offset: int, length: int) -> None:
        """``length`` bytes at SRAM offset ``offset`` were stored by the
        executor's native code (the exchange's incoming words): recorded
        as dirty, and parity marks there go."""
        self.exchange.written(self.window_start(tile) + offset, length)
        self._unmark(tile, offset - offset % WORD, offset + length)

    def bad_word(self, tile: int, address: int, width: int) -> bool:
        """Whether a load of ``width`` at ``address`` reads a word marked
        with bad parity."""
        offset = self.locate(address).offset
        return any((tile, w) in self.bad_parity
                   for w in range(offset - offset % WORD, offset + width, WORD))

    def mark_bad_parity(self, tile: int, address: int) -> None:
        """The fault API: the 64-bit word holding ``address`` reads with a
        parity error until written or reset."""
        self._exchange_offset(tile, 0)
        offset = self.locate(address).offset
        self.bad_parity.add((tile, offset - offset % WORD))

    def zero(self, tile: int, address: int, length: int) -> None:
        """``length`` bytes of ``tile``'s memory from ``address`` read 0
        (within memory; parity marks there go too)."""
        offset = self.locate(address).offset
        length = min(length, self.sram - offset)
        self.exchange.clear(self.window_start(tile) + offset, length)
        self._unmark(tile, offset - offset % WORD, offset + length)

    def _unmark(self, tile: int, start: int, end: int) -> None:
        """Parity marks on ``tile``'s words from offset ``start`` to ``end`` go."""
        if self.bad_parity:
            self.bad_parity -= {(t, w) for t, w in self.bad_parity if t == tile and start <= w < end}

    def clear(self) -> None:
        self.exchange.clear()
        self.bad_parity.clear()
