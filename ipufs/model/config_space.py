# Config space as the model keeps it (docs/registers.md): the identity
# registers, written once and restored whenever a host stores over them;
# the status registers, stored as the model's state moves (only those
# whose value changed: this runs between a device event and its signal);
# and what a watcher of host stores compares: the words config space must
# hold while no command waits (doorbells 0, the status registers as last
# stored, the identity).
from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from ipufs.abi import registers as R
from ipufs.model.memory import BarMemory

_U32 = struct.Struct("<I")
_DOORBELLS = slice(R.DOORBELL_SPAN[0] // 4, R.DOORBELL_SPAN[1] // 4)


class ConfigSpace:
    """The registers of one IPU's config BAR ``config``: ``identity`` (name
    -> value) and the ``status`` registers, in the order their values are
    given."""

    def __init__(self, config: BarMemory, identity: dict[str, int], status: Sequence[R.Register],
                 kept: Sequence[R.Register] = ()) -> None:
        self.config = config
        self.words = config.words
        self._identity_index = np.array([R.REGISTERS[n].index for n in identity], dtype=np.intp)
        self._identity_values = np.array(list(identity.values()), dtype=np.uint32)
        self._status_words = tuple(reg.index for reg in status)
        self._status_index = np.array(self._status_words, dtype=np.intp)
        doorbells = np.arange(_DOORBELLS.start, _DOORBELLS.stop, dtype=np.uint32)
        kept_index = np.array([reg.index for reg in kept], dtype=np.intp)
        #: the words a watcher compares, and the values they must hold:
        #: doorbells, status, the registers the device keeps (kept), identity
        self.watch_index = np.concatenate([doorbells, self._status_index, kept_index,
                                           self._identity_index]).astype(np.uint32)
        self.watch_expect = np.zeros(self.watch_index.size, dtype=np.uint32)
        self.watch_expect[-self._identity_index.size:] = self._identity_values
        self._kept_slot = {reg.index: doorbells.size + len(status) + i for i, reg in enumerate(kept)}
        for reg in kept:
            self.watch_expect[self._kept_slot[reg.index]] = self.get(reg)
        self._status_slot = doorbells.size
        #: the status values last stored, in ``status`` order
        self.synced: list[int] = []

    def get(self, reg: R.Register) -> int:
        return int(self.words[reg.index])

    def set(self, reg: R.Register, value: int) -> None:
        value &= 0xFFFFFFFF
        if self.get(reg) != value:
            self.config.write(reg.offset, _U32.pack(value))

    def after_write(self, reg: R.Register, offset: int, data: bytes | memoryview) -> int | None:
        """What ``reg`` would hold after a host write of ``data`` at
        ``offset``; None if the write does not touch it."""
        start, end = reg.offset, reg.offset + 4
        if offset >= end or offset + len(data) <= start:
            return None
        word = bytearray(self.config.read(start, 4))
        for at in range(max(offset, start), min(offset + len(data), end)):
            word[at - start] = data[at - offset]
        return int.from_bytes(word, "little")

    def doorbells_rung(self) -> bool:
        return bool(self.words[_DOORBELLS].any())

    def write_identity(self) -> None:
        self.config.store_words(self._identity_index, self._identity_values)

    def store_all(self, values: list[int]) -> None:
        """Every status register holds ``values`` (in ``status`` order)."""
        values = [v & 0xFFFFFFFF for v in values]  # a register holds a u32, whatever the model was given
        self.config.store_words(self._status_index, np.array(values, dtype=np.uint32))
        self.watch_expect[self._status_slot:self._status_slot + len(values)] = values
        self.synced = values

    def store(self, slot: int, value: int) -> None:
        """Status register number ``slot`` (in ``status`` order) now holds ``value``."""
        value &= 0xFFFFFFFF
        if self.synced[slot] != value:
            self.synced[slot] = value
            self.config.store_word(self._status_words[slot], value)
            self.watch_expect[self._status_slot + slot] = value

    def kept(self, reg: R.Register) -> int:
        """What the device last stored in kept register ``reg``."""
        return int(self.watch_expect[self._kept_slot[reg.index]])

    def keep(self, reg: R.Register, value: int) -> None:
        """Kept register ``reg`` holds ``value`` (the device's)."""
        value &= 0xFFFFFFFF
        self.watch_expect[self._kept_slot[reg.index]] = value
        if self.get(reg) != value:
            self.config.store_word(reg.index, value)

    def stored_over(self) -> bool:
        """Whether a host stored over a word the model keeps (a command, a
        status or identity register). Only reads: any thread may ask."""
        return not np.array_equal(self.words[self.watch_index], self.watch_expect)
