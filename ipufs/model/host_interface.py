# The registers through which a host loads and paces a C600's tiles, as a
# runtime that drives a real one uses them (osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs): the autoloader (AUTOLD_*) and the host
# sync marks (HSP_GS1_CONTROL, HSP_GS2_CONTROL). What that runtime shows:
# it pushes an image word by word into AUTOLD_DATA, starts a load with GO
# in AUTOLD_CSR and waits for GO to read 0; it writes a mark (the low 16
# bits) into an HSP register and waits for it to read 0 again. What each
# load does and what consumes a mark is not public; ipufs's reading of
# them (docs/registers.md) is its own:
# - GO with DATA_PRESENT takes the words pushed as the image; GO without
#   it copies the image to the start of tile memory of tiles 0..the last
#   tile (bits 9..19), zeroes the rest of their memory up to the KiB in
#   AUTOLD_TARGET bits 10..19, and starts their supervisors there; a load
#   ends at once (GO reads 0 when the store returns);
# - a mark is a count of host syncs the host grants: once a host has
#   written one since reset, the tiles' syncs with the host on that zone
#   family (GS1: zones 4, 5, 12, 13; GS2: 6, 7, 14, 15) each take one, and
#   wait for the host while there is none.
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ipufs.abi import registers as R
from ipufs.model.config_space import ConfigSpace
from ipufs.model.sync import is_global2
from ipufs.model.tiles import TileMemory

REG = R.REGISTERS
CSR, TARGET, DATA = REG["AUTOLD_CSR"], REG["AUTOLD_TARGET"], REG["AUTOLD_DATA"]
MARKS = {1: REG["HSP_GS1_CONTROL"], 2: REG["HSP_GS2_CONTROL"]}
#: the registers the host interface keeps: a host store to one is acted on
KEPT = (CSR, DATA, MARKS[1], MARKS[2])
GO, DATA_PRESENT = 1 << 8, 1 << 20
LAST_TILE_SHIFT, LAST_TILE_MASK = 9, 0x7FF
MARK_MASK = 0xFFFF
#: the most words the autoloader holds (its images are 4 KiB at most: ours)
MAX_WORDS = 1 << 16

#: start(tile, entry): the IPU starts a tile's supervisor at ``entry``
Start = Callable[[int, int], None]
#: sync(zone): the tiles' sync on ``zone`` goes ahead (its mark taken)
Sync = Callable[[int], object]


class HostInterface:
    """The autoloader and host sync marks of one IPU's config space."""

    def __init__(self, registers: ConfigSpace, tiles: TileMemory, start: Start, sync: Sync) -> None:
        self.registers = registers
        self.tiles = tiles
        self.start = start
        self.sync = sync
        #: the zone the tiles wait at for a mark, if any
        self.waiting: int | None = None
        self.pushed: list[int] = []
        self.image = b""
        #: the host syncs granted and not yet taken, by family (1: GS1, 2: GS2),
        #: for the families a host has written a mark to since reset
        self.marks: dict[int, int] = {}

    def reset(self) -> None:
        self.waiting = None
        self.pushed.clear()
        self.image = b""
        self.marks.clear()
        for reg in KEPT:
            self.registers.keep(reg, 0)

    def act(self) -> bool:
        """Act on what the host stored in the kept registers through a
        mapping (a store of what a register holds is no change, and not
        seen: pwrite, or `ipufs run`'s exact MMIO, sees every store);
        returns whether there was any."""
        acted = False
        for reg in KEPT:
            if self.registers.get(reg) != self.registers.kept(reg):
                self._stored(reg)
                acted = True
        return acted

    def wrote(self, offset: int, length: int) -> bool:
        """A host wrote ``length`` bytes at ``offset`` (pwrite): each kept
        register it covers acts, whatever it held. Returns whether any did."""
        acted = False
        for reg in KEPT:
            if offset <= reg.offset and reg.offset + 4 <= offset + length:
                self._stored(reg)
                acted = True
        return acted

    def _stored(self, reg: R.Register) -> None:
        value = self.registers.get(reg)
        if reg is DATA:
            self._push(value)
        elif reg is CSR:
            self._control(value)
        else:
            self._mark(reg, value)

    def _push(self, word: int) -> None:
        if len(self.pushed) < MAX_WORDS:
            self.pushed.append(word)
        self.registers.keep(DATA, 0)  # taken: it reads 0 again

    def _control(self, value: int) -> None:
        if value & GO:
            if value & DATA_PRESENT:
                self.image = b"".join(w.to_bytes(4, "little") for w in self.pushed)
                self.pushed.clear()
            else:
                self._load((value >> LAST_TILE_SHIFT) & LAST_TILE_MASK, (self.registers.get(TARGET) >> 10) & 0x3FF)
        self.registers.keep(CSR, value & ~GO)  # done

    def _load(self, last: int, kib: int) -> None:
        tiles, base = self.tiles, self.tiles.base
        size = min(kib * 1024, tiles.sram)
        image = np.frombuffer(self.image[:tiles.sram], np.uint32)  # whole words: pushed as such
        for tile in range(min(last + 1, tiles.profile.tiles)):
            if size > len(self.image):
                tiles.zero(tile, base + len(self.image), size - len(self.image))
            if self.image:
                tiles.write_words(tile, base, image)
            self.start(tile, base)

    def _mark(self, reg: R.Register, value: int) -> None:
        family = 2 if reg is MARKS[2] else 1
        self.marks[family] = value & MARK_MASK
        self.registers.keep(reg, value & MARK_MASK)
        if self.waiting is not None:
            self.wait(self.waiting)

    def gates(self, zone: int) -> bool:
        """Whether the tiles' syncs on ``zone`` wait for host marks."""
        return (2 if is_global2(zone) else 1) in self.marks

    def wait(self, zone: int) -> None:
        """The tiles' sync on ``zone`` takes a mark and goes ahead, or waits
        for the host's next."""
        family = 2 if is_global2(zone) else 1
        if not self.marks.get(family):
            self.waiting = zone
            return
        self.waiting = None
        self.marks[family] -= 1
        self.registers.keep(MARKS[family], self.marks[family])
        self.sync(zone)
