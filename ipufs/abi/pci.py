# How an emulated IPU shows on the PCI bus: its address. Real addresses
# come from the machine; ipufs gives IPU N bus 0x1a + N (the first bus the
# gc-info example shows), carried into the domain past bus 0xff. `ipufs ls`
# prints it and the sysfs view names its device directories by it
# (docs/sysfs.md).
from __future__ import annotations

#: The PCI bus of IPU 0.
FIRST_BUS = 0x1A


def pci_address(index: int) -> str:
    """IPU ``index``'s PCI address, domain:bus:device.function."""
    bus = FIRST_BUS + index
    return f"{bus >> 8:04x}:{bus & 0xFF:02x}:00.0"


def root_bus(index: int) -> str:
    """The sysfs name of the root bus IPU ``index`` sits on, pciDDDD:BB:
    each IPU is alone on a bus of its own, below no bridge."""
    return "pci" + pci_address(index)[:7]
