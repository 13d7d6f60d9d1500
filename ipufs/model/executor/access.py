# Tile memory as the Python path of the executor reaches it: loads,
# stores and instruction fetches with the rules of the programmer's guide
# (natural alignment; code from region 0 only; 128-bit accesses in the
# interleaved region), parity marks, and the data break watching the
# instruction that issues now (DBRK: the debug unit's breakpoints).
# The native loop does the same in C (native/src/executor.c) while no
# parity mark exists.
from __future__ import annotations

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor.csr import DBG_BRK_ID, DBRK_CHANNEL
from ipufs.model.executor.ports import Watch
from ipufs.model.executor.state import MASK, Context, Etype, TileFault, TileState
from ipufs.model.tiles import TileMemory

#: tile exceptions of faults and what EXC_CAUSE they show, as docs/execution.md maps them
PARITY_FAULT = (Etype.MEMERR, ExceptionCause.PARITY)
_ADDRESS = 0x1FFFFF


def hits(watch: Watch, address: int, width: int, store: bool) -> bool:
    """Whether an access of ``width`` bytes at ``address`` meets a DBRK watch."""
    first, end, loads, stores = watch
    if not (stores if store else loads):
        return False
    at = address & _ADDRESS
    return at < end and first < at + width


class TileAccess:
    """Loads, stores and fetches of the tiles of one IPU."""

    def __init__(self, tiles: TileMemory) -> None:
        self.tiles = tiles
        #: the DBRK watch of the instruction issuing now, and whose it is (else None)
        self.watch: Watch | None = None
        self.watcher: Context | None = None
        self._words = tiles.exchange.words.data  # the exchange BAR's words, read as ints
        self._window = tiles.window
        self._base = tiles.exchange_base
        self._sram = tiles.sram
        #: SRAM offsets below this are region 0 (code); the rest region 1
        self._region1 = tiles.region1 - tiles.base
        self._memory_base = tiles.base
        self._aliasing = tiles.aliasing

    def _offset(self, address: int) -> int:
        """TileMemory.offset, inline (it runs per access): -1 where there is no memory."""
        if self._aliasing:
            return (address & _ADDRESS) % self._window % self._sram
        offset = address - self._memory_base
        return offset if 0 <= offset < self._sram else -1

    def executable(self, address: int) -> bool:
        """Code is fetched from region 0 only (the programmer's guide; the
        C600's memory map)."""
        return 0 <= self._offset(address) < self._region1

    def require_region1(self, t: TileState, address: int) -> None:
        if self._offset(address) < self._region1:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.INVALID_ADDRESS, address & MASK,
                            f"128-bit access at 0x{address & MASK:x} outside the interleaved region")

    def _no_memory(self, address: int, what: str) -> TileFault:
        return TileFault(Etype.INVALID_ADDR, ExceptionCause.INVALID_ADDRESS, address, f"{what} at 0x{address:x}: "
                         f"no tile memory there (0x{self._memory_base:x}..0x{self._memory_base + self._sram:x})")

    def load(self, t: TileState, address: int, width: int) -> int:
        address &= MASK
        tiles = self.tiles
        if address % width:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.MISALIGNED, address,
                            f"{width}-byte load at 0x{address:x}")
        if self.watch is not None and hits(self.watch, address, width, False):
            raise self._data_break(address, width, "load")
        offset = self._offset(address)
        if offset < 0:
            raise self._no_memory(address, f"{width}-byte load")
        if tiles.bad_parity and tiles.bad_word(t.tile, address, width):
            raise TileFault(*PARITY_FAULT, address, f"parity error loading 0x{address:x}")
        if width == 4:  # the common case, one word of the BAR without building bytes
            return self._words[(self._base + t.tile * self._window + offset) >> 2]
        return int.from_bytes(tiles.read(t.tile, address, width), "little")

    def store(self, t: TileState, address: int, width: int, value: int) -> None:
        address &= MASK
        if address % width:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.MISALIGNED, address,
                            f"{width}-byte store at 0x{address:x}")
        if self.watch is not None and hits(self.watch, address, width, True):
            raise self._data_break(address, width, "store")
        offset = self._offset(address)
        if offset < 0:
            raise self._no_memory(address, f"{width}-byte store")
        tiles = self.tiles
        if width == 4 and not tiles.bad_parity:  # one word, recorded dirty as BarMemory.write does
            tiles.exchange.store_word((self._base + t.tile * self._window + offset) >> 2, value & MASK)
            return
        tiles.write(t.tile, address, (value & ((1 << 8 * width) - 1)).to_bytes(width, "little"))

    def fetch(self, t: TileState, address: int) -> int:
        """The instruction word at ``address`` (INVALID_PC outside region 0)."""
        offset = self._offset(address)
        if not 0 <= offset < self._region1:
            raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, address,
                            f"fetch at 0x{address:x} outside region 0")
        tiles = self.tiles
        if tiles.bad_parity and tiles.bad_word(t.tile, address, 4):
            raise TileFault(*PARITY_FAULT, address, f"parity error fetching 0x{address:x}")
        return self._words[(self._base + t.tile * self._window + offset) >> 2]

    def _data_break(self, address: int, width: int, access: str) -> TileFault:
        c = self.watcher
        assert c is not None, "a watch is set only with its context"
        c.csrs[DBG_BRK_ID] = DBRK_CHANNEL
        return TileFault(Etype.DBRK, ExceptionCause.BREAKPOINT, address,
                         f"data break: {width}-byte {access} at 0x{address:x}")
