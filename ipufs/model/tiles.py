# Tile memory and the address rules of Graphcore's IPU programmer's guide
# for GC2, scaled to other profiles as documented in
# docs/registers.md:
# - a tile address is an unsigned 21-bit number;
# - memory is populated from BASE = WINDOW (0x40000 on GC2) for SRAM bytes;
# - any address aliases onto populated memory: offset = addr mod WINDOW
#   (the guide's "mask off the upper bits starting at bit 18" on GC2), and an
#   offset past the SRAM (profiles whose SRAM is not a power of two) wraps
#   modulo the SRAM;
# - two regions, region 1 when offset >= SRAM/2 (bit 17 on GC2); each of
#   eight 64-bit banks; region 0 banks are contiguous, region 1 banks are
#   interleaved by address bit 3 (odd/even 64-bit words);
# - loads and stores must be naturally aligned.
# A tile's SRAM lives in the exchange BAR at EXCHANGE_BASE + tile * WINDOW
# (tile-major; logical tile T is window instance T: docs/registers.md).
from __future__ import annotations

from dataclasses import dataclass

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


class TileMemory:
    """Every tile's SRAM, viewed through the exchange BAR."""

    def __init__(self, profile: Profile, exchange: BarMemory) -> None:
        self.profile = profile
        self.window = profile.tile_window
        self.sram = profile.sram_per_tile
        self.base = self.window
        #: where tile 0's window starts in the exchange BAR
        self.exchange_base = profile.exchange_tile_base
        self.exchange = exchange
        self.bad_parity: set[tuple[int, int]] = set()  # (tile, word offset)

    def locate(self, address: int) -> Location:
        """Where ``address`` lands in a tile's SRAM (any 21-bit value)."""
        offset = (address & ((1 << ADDRESS_BITS) - 1)) % self.window % self.sram
        half = self.sram // 2
        region = 1 if offset >= half else 0
        within = offset - region * half
        if region == 0:
            bank = within * BANKS_PER_REGION // half
        else:
            pair = within * (BANKS_PER_REGION // 2) // half
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

    def clear(self) -> None:
        self.exchange.clear()
        self.bad_parity.clear()
