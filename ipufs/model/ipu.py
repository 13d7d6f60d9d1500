# One emulated IPU: its profile, its index, its four memory regions and its
# interrupt controller. Config space is reached synchronously through
# read_config/write_config, the hook for register side effects.
from __future__ import annotations

from collections.abc import Mapping

from ipufs.model.interrupts import Interrupt, InterruptController
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
        self.interrupts = InterruptController()
        self.reset_count = 0

    def raise_interrupt(self, source: Interrupt) -> None:
        """The device raises an interrupt source (delivered by the driver)."""
        self.interrupts.raise_(source)

    def reset(self) -> None:
        """A device reset: tile memory and the mailbox are cleared and
        pending interrupts dropped; host memory (ipuN_mem, the host's side)
        and the interrupt mask are kept. The reset counter goes up."""
        self.memory[Region.EXCHANGE].fill(0)
        self.memory[Region.MAILBOX].fill(0)
        self.interrupts.pending = 0
        self.interrupts.take()
        self.reset_count += 1

    def read_config(self, offset: int, length: int) -> bytes:
        """A host read of config space (pread on ipuN)."""
        return self.memory[Region.CONFIG].read(offset, length)

    def write_config(self, offset: int, data: bytes | memoryview) -> int:
        """A host write to config space (pwrite on ipuN); returns the count
        stored (short at the end of the BAR)."""
        return self.memory[Region.CONFIG].write(offset, data)
