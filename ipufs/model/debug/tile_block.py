# The per-tile TDI registers in config space: from 0x30000, one 0x40
# stride per tile instance, a register every 4 bytes, instances numbered
# by physical tile (ipu1: research/ipu1/ipu1_consts.c; the GC200: a runtime
# that drives a real C600, osmarks/ipu-stack crates/ipu-driver/src/lib.rs;
# docs/registers.md). Register R of the instance of logical tile T reads
# what the TDI's READ_REG of (T, R) would answer, and a store to it is the
# TDI's WRITE_REG of (T, R): the same debug unit as the TDI aperture. Mapped reads reach no daemon code, so the model
# keeps the block current: every tile whose debug state changed (the
# unit's ``changed``) is published into it. Stores reach the model by
# pwrite (write_words) or, through a mapping, when the register watcher
# finds the block differing from ``expect`` (act). An accepted DBG_IEXEC
# only queues its instruction (TDI_STS.BUSY); it retires at the
# executor's next run(), which publishes the tile again.
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from ipufs.abi.registers import TDI_REGISTER_WIDTH, TDI_TILE_STRIDE, TdiResult
from ipufs.model.debug.registers import WRITE_ONLY, TdiRefused, TdiRegister
from ipufs.model.memory import BarMemory, sparse_words
from ipufs.model.profile import Profile

#: registers per tile (TDBG_TDI_APERTURE_SPACE)
PER_TILE = TDI_TILE_STRIDE // TDI_REGISTER_WIDTH


class Registers(Protocol):
    """What the block shows and acts on: the debug unit's registers."""

    #: tiles whose registers may have changed since they were last published
    changed: set[int]

    def values(self, tile: int) -> list[int]: ...

    def write(self, tile: int, reg: int, value: int) -> TdiResult: ...
#: stores found together are applied in the order a host's sequence needs
#: (the owner and data first, then clearing flags and exceptions, then the
#: injection), whatever their addresses
_ORDER: dict[int, int] = {TdiRegister.TDI_CLR: PER_TILE, TdiRegister.DBG_ECLR: PER_TILE + 1,
                          TdiRegister.DBG_IEXEC: PER_TILE + 2}
#: the order a tile's words are published in, for a host that polls the
#: mapping while they are stored: TDI_STS after the registers that show an
#: injection's effect (a host that sees BUSY clear sees CTXT_STS and
#: DBG_DATA as it left them), the write-only registers last (a host that
#: sees its DBG_IEXEC read 0 again, taken, sees the TDI_STS that followed:
#: BUSY, or a refusal's flags)
_PUBLISH: tuple[int, ...] = tuple(sorted(range(PER_TILE),
                                         key=lambda r: (r in WRITE_ONLY, r == TdiRegister.TDI_STS, r)))


class TileBlock:
    """The per-tile TDI registers of one IPU's config space."""

    def __init__(self, profile: Profile, config: BarMemory, registers: Registers) -> None:
        if profile.tdi_tile_base is None:
            raise ValueError(f"profile {profile.name} has no per-tile TDI registers")
        self.start = profile.tdi_tile_base
        self.end = self.start + profile.tdi_tile_span
        self.tiles = profile.tiles
        #: logical tile -> its instance (physical tile), and back
        self.instance = profile.tile_map.physical
        self.tile_of = profile.tile_map.logical
        self.config = config
        self.registers = registers
        self._first = self.start // 4
        #: the block as clients see it, and what the model last stored there
        self.words: NDArray[np.uint32] = config.words[self._first : self.end // 4]
        self.expect: NDArray[np.uint32] = sparse_words(self.words.size)
        #: tiles whose registers must be published (the unit's: the executor adds those it changed)
        self.dirty = registers.changed
        self.dirty.clear()
        #: instances holding no tile that a client stored into: they read 0 again
        self._stray: set[int] = set()
        config.clear(self.start, self.end - self.start)  # a persistent BAR's old values go

    def overlaps(self, offset: int, length: int) -> bool:
        return offset < self.end and offset + length > self.start

    def clear(self) -> None:
        """Every register reads 0 (reset), the pages dropped."""
        self.config.clear(self.start, self.end - self.start)
        self.expect[self.expect != 0] = 0  # only written pages: the rest stay the zero page
        self.dirty.clear()
        self._stray.clear()

    # --- what a read answers ------------------------------------------------------
    def values(self, instance: int) -> list[int]:
        """The 16 registers of ``instance`` as a read answers them (0 for an
        instance that holds no tile)."""
        if not 0 <= instance < self.tiles:
            return [0] * PER_TILE
        return [v & 0xFFFFFFFF for v in self.registers.values(self.tile_of[instance])]

    def publish(self) -> None:
        """Store the registers of every dirty tile. A word a client stored
        and the model has not acted on yet is left for it to act on."""
        if not self.dirty and not self._stray:
            return
        words, expect, config = self.words, self.expect, self.config
        instances = sorted({self.instance[tile] for tile in self.dirty if 0 <= tile < self.tiles} | self._stray)
        for instance in instances:
            at = instance * PER_TILE
            now = self.values(instance)
            held, stored = words[at : at + PER_TILE].tolist(), expect[at : at + PER_TILE].tolist()
            if now != stored or held != stored:
                for reg in _PUBLISH:
                    if held[reg] == stored[reg] != now[reg]:  # (held != stored: a store not acted on yet)
                        config.store_word(self._first + at + reg, now[reg])
                expect[at : at + PER_TILE] = now
        self.dirty.clear()
        self._stray.clear()

    # --- stores ---------------------------------------------------------------------
    def write(self, instance: int, reg: int, value: int) -> int:
        """A store of ``value`` to register ``reg`` of ``instance``: the
        TDI's WRITE_REG of its tile. Returns its TDI_RESULT (a refusal also
        sets TDI_STS as the aperture's does)."""
        if not 0 <= instance < self.tiles:
            self._stray.add(instance)  # restore what a mapped store changed
            return TdiResult.BAD_TILE
        tile = self.tile_of[instance]
        self.dirty.add(tile)
        try:
            return self.registers.write(tile, reg, value & 0xFFFFFFFF)
        except TdiRefused as refused:
            return refused.result

    def write_words(self, offset: int, data: bytes | memoryview) -> int:
        """A pwrite of whole registers inside the block: each word in
        address order; stops at the first refused (TdiRefused when it is
        the first, else returns the bytes done). Publishes what changed."""
        if offset % TDI_REGISTER_WIDTH or len(data) % TDI_REGISTER_WIDTH:
            raise TdiRefused(TdiResult.BAD_WIDTH, "per-tile TDI registers are written as whole, aligned u32 words")
        done = 0
        try:
            for at in range(0, len(data), TDI_REGISTER_WIDTH):
                instance, reg = divmod((offset + at - self.start) // TDI_REGISTER_WIDTH, PER_TILE)
                result = self.write(instance, reg, int.from_bytes(data[at : at + TDI_REGISTER_WIDTH], "little"))
                if result != TdiResult.OK:
                    if done:
                        return done
                    raise TdiRefused(result, f"physical tile {instance} TDI register 0x{reg:02x}: "
                                             f"{TdiResult(result).name}")
                done += TDI_REGISTER_WIDTH
            return done
        finally:
            self.publish()

    def write_spanning(self, offset: int, data: memoryview, write_outside: Callable[[int, memoryview], int]) -> int:
        """A config space write that covers the block: what lies before it
        (``write_outside``), the registers, what lies after, in order;
        returns the count written (TdiRefused when the first register is
        refused and nothing lies before it)."""
        n = self.config.clip(offset, len(data))
        first, last = max(offset, self.start), min(offset + n, self.end)
        done = write_outside(offset, data[: first - offset]) if first > offset else 0
        try:
            done += self.write_words(first, data[first - offset : last - offset])
        except TdiRefused:
            if not done:
                raise
            return done  # what lies before was written
        if done < last - offset:
            return done
        if offset + n > last:
            done += write_outside(last, data[last - offset : n])
        return done

    def changed(self) -> bool:
        """Whether a client stored into the block (only reads: any thread)."""
        return not np.array_equal(self.words, self.expect)

    def act(self) -> bool:
        """Act on what clients stored through a mapping: each changed word
        is a store to its register, in the order of a host's sequence (per
        tile: the owner, data and other registers, then TDI_CLR, DBG_ECLR,
        DBG_IEXEC); refused ones set TDI_STS and are undone (a DBG_IEXEC
        while the last injection is BUSY: DBLE). Returns whether there
        was any."""
        where = np.flatnonzero(self.words != self.expect)
        if not where.size:
            return False
        values = self.words[where]
        stores = [(int(i) // PER_TILE, int(i) % PER_TILE, int(v)) for i, v in zip(where, values, strict=True)]
        for instance, reg, value in sorted(stores, key=lambda s: (s[0], _ORDER.get(s[1], s[1]))):
            self.write(instance, reg, value)
        self.expect[where] = values  # acted on: publish stores what the registers now read
        self.publish()
        return True
