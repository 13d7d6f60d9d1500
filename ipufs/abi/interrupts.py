# The IPU's interrupt sources and the signals the driver sends for them.
# The six sources are the chip's first MSI-X vectors (IPUEX, MCUDRVALID,
# HSPGS1E0, HSPGS1E1, HSPGS2E0, HSPGS2E1), which the real driver turns into
# signals 44..49 with these names (the public research repository
# github.com/Saghetti0/graphcore-ipu-research; docs/abi.md).
from __future__ import annotations

import enum


class Interrupt(enum.IntEnum):
    """Interrupt sources; the value is the source's bit number."""

    EXCEPTION = 0  # IPUEX: an IPU exception
    ICU_DOORBELL = 1  # MCUDRVALID: the ICU queued a message for the host
    GS1_E0 = 2  # HSPGS1E0: GS1 sync, slave zone
    GS1_E1 = 3  # HSPGS1E1: GS1 sync, master zone
    GS2_E0 = 4  # HSPGS2E0: GS2 sync, slave zone
    GS2_E1 = 5  # HSPGS2E1: GS2 sync, master zone

    @property
    def bit(self) -> int:
        return 1 << self.value

    @property
    def signal(self) -> int:
        """The POSIX real-time signal the driver sends for this source."""
        return FIRST_SIGNAL + self.value


FIRST_SIGNAL = 44
ALL_SOURCES = (1 << len(Interrupt)) - 1

#: Signal names of the real driver, in source order (44..49).
SIGNAL_NAMES: dict[Interrupt, str] = {
    Interrupt.EXCEPTION: "PCIE_IPU_EXCEPTION_SIG",
    Interrupt.ICU_DOORBELL: "PCIE_ICU_DR_SIG",
    Interrupt.GS1_E0: "PCIE_HSPGS1E0_SIG",
    Interrupt.GS1_E1: "PCIE_HSPGS1E1_SIG",
    Interrupt.GS2_E0: "PCIE_HSPGS2E0_SIG",
    Interrupt.GS2_E1: "PCIE_HSPGS2E1_SIG",
}
