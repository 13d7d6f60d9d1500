# The interrupt controller that masks and latches an IPU's interrupt
# sources (ipufs/abi/interrupts.py). Latching is ipufs's own definition, as
# an interrupt controller does it: a source raised while masked sets one
# pending bit and is delivered once on unmask.
from __future__ import annotations

from dataclasses import dataclass, field

from ipufs.abi.interrupts import ALL_SOURCES, Interrupt


@dataclass
class InterruptController:
    """Mask, pending latch and counters of one IPU's interrupt sources.
    Controllers may share an ``outbox``: the ``index`` of each one that has
    sources to deliver is in it exactly while it has, so whoever delivers
    finds them without asking every controller."""

    mask: int = 0  # bit set: source masked
    pending: int = 0  # bit set: raised while masked, not yet delivered
    raised: dict[Interrupt, int] = field(default_factory=lambda: dict.fromkeys(Interrupt, 0))
    index: int = 0
    outbox: set[int] = field(default_factory=set)
    _out: list[Interrupt] = field(default_factory=list)

    def raise_(self, source: Interrupt) -> None:
        """The device raises ``source``: deliverable now, or latched."""
        self.raised[source] += 1
        bit = 1 << source  # Interrupt.bit, without the enum property
        if self.mask & bit:
            self.pending |= bit
        else:
            self._out.append(source)
            self.outbox.add(self.index)

    def set_mask(self, mask: int) -> None:
        """Replace the mask; pending sources it unmasks become deliverable,
        in source order."""
        self.mask = mask & ALL_SOURCES
        released = self.pending & ~self.mask
        self.pending &= self.mask
        if released:
            self._out.extend(s for s in Interrupt if released & s.bit)
            self.outbox.add(self.index)

    def take(self) -> list[Interrupt]:
        """The sources to deliver now, in order."""
        out, self._out = self._out, []
        self.outbox.discard(self.index)
        return out

    def clear(self) -> None:
        """Back to all unmasked with nothing pending (a new attachment)."""
        self.mask = 0
        self.pending = 0
        self._out.clear()
        self.outbox.discard(self.index)
