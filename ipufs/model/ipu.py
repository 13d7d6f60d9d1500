# One emulated IPU: its profile, its index, and its four memory regions.
# Later issues give the regions behaviour (registers, TDI, mailbox, sync);
# today config space is plain memory reached synchronously through
# read_config/write_config, the hook for register side effects.
from __future__ import annotations

from collections.abc import Mapping

from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile, Region


class Ipu:
    def __init__(self, profile: Profile, index: int, memory: Mapping[Region, BarMemory]) -> None:
        for region in Region:
            if memory[region].size != profile.region_size(region):
                raise ValueError(f"{region.value} memory has the wrong size")
        self.profile = profile
        self.index = index
        self.memory = dict(memory)

    def read_config(self, offset: int, length: int) -> bytes:
        """A host read of config space (pread on ipuN)."""
        return self.memory[Region.CONFIG].read(offset, length)

    def write_config(self, offset: int, data: bytes | memoryview) -> int:
        """A host write to config space (pwrite on ipuN); returns the count
        stored (short at the end of the BAR)."""
        return self.memory[Region.CONFIG].write(offset, data)
