# The sysfs view: for every IPU, the PCI device directory the kernel and the
# Graphcore driver publish under /sys/bus/pci/devices, named by its PCI
# address, with attributes read live from the model at each read.
#
# Facts (aspen/sdk/src/driver/discovery.rs of the public research repository
# github.com/Saghetti0/graphcore-ipu-research, and the pci.ids database): the
# kernel's attributes of a PCI device (vendor, device, subsystem ids, class,
# numa_node, resource, link speed and width, a driver link) and the names of
# the driver's own (file_name, board_name, ..., continuous_memory_nodes);
# aspen-sdk reads file_name and parses all of it as a number, so it carries
# no newline. Formats of the kernel's attributes follow its pci-sysfs; what
# no source tells (the driver's formats, BAR addresses, subsystem device,
# class) is ipufs's own, in docs/sysfs.md.
from __future__ import annotations

from collections.abc import Callable

from ipufs import compat
from ipufs.abi import registers as R
from ipufs.abi.pci import pci_address
from ipufs.abi.serial import serial_text
from ipufs.driver.nodes import ROOT_INO, Kind, NodeTree
from ipufs.model.ipu import Ipu
from ipufs.model.profile import Region

#: The kernel's class code of a processing accelerator (PCI class 0x12).
PCI_CLASS = 0x120000
#: The driver link's target, as the kernel makes it from a device's own
#: directory (only its last component, the driver's name, is ever read).
DRIVER_LINK = "../../../bus/pci/drivers/ipu"
#: What a read of an attribute file reports as its size, as sysfs does.
ATTRIBUTE_SIZE = 4096

# struct resource flags the kernel prints: a 64-bit memory BAR, and one
# that is also prefetchable (IORESOURCE_MEM | _MEM_64 | _SIZEALIGN, plus
# the BAR's own type bits).
_MEM64 = 0x140204
_MEM64_PREFETCH = 0x14220C
#: The BARs ipufs's IPU has: (BAR number, region, prefetchable).
BARS = ((0, Region.CONFIG, False), (2, Region.EXCHANGE, True), (4, Region.MAILBOX, False))
#: Bus addresses: each IPU owns a 64 GiB window from 0x4000000000 up.
_WINDOW = 1 << 36
_BASE = 1 << 38


def _pow2_at_least(n: int) -> int:
    return 1 << (n - 1).bit_length()


def bar_ranges(ipu: Ipu) -> dict[int, tuple[int, int, int]]:
    """BAR number -> (start, end, flags) as `resource` prints them. A BAR
    is aligned to its size rounded up to a power of two, as PCI wants;
    its length is the node's size, the part a client maps."""
    ranges = {}
    start = _BASE + ipu.index * _WINDOW
    for bar, region, prefetch in BARS:
        size = ipu.profile.region_size(region)
        align = _pow2_at_least(size)
        start = (start + align - 1) // align * align
        ranges[bar] = (start, start + size - 1, _MEM64_PREFETCH if prefetch else _MEM64)
        start += align
    return ranges


def host_memory_range(ipu: Ipu) -> tuple[int, int]:
    """ipuN_mem as a range of bus addresses, after the BARs."""
    end = max(e for _, e, _ in bar_ranges(ipu).values()) + 1
    size = ipu.profile.host_memory_size
    start = (end + size - 1) // size * size
    return start, start + size - 1


def _reg(ipu: Ipu, name: str) -> int:
    return int(ipu.config.words[R.REGISTERS[name].index])


def _version(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def _link_speed(tenths: int) -> str:
    return f"{tenths / 10:.1f} GT/s PCIe"


def _resource(ipu: Ipu) -> str:
    ranges = bar_ranges(ipu)
    # A device that is not a bridge shows its six BARs and the ROM.
    return "".join("0x%016x 0x%016x 0x%016x\n" % ranges.get(bar, (0, 0, 0)) for bar in range(7))


def _error_state(ipu: Ipu) -> str:
    error = _reg(ipu, "ERROR_STATE")
    return "no errors" if error == 0 else R.ExceptionCause(error).name.lower()


def _serial(ipu: Ipu) -> str:
    # As `ipufs info` prints the board serial number.
    return serial_text(_reg(ipu, "BOARD_SERIAL_HI") << 32 | _reg(ipu, "BOARD_SERIAL_LO"))


def _continuous_memory(ipu: Ipu) -> str:
    start, end = host_memory_range(ipu)
    return f"0x{start:x}-0x{end:x}\n"


Attribute = Callable[[Ipu], str]

#: The attribute files of a device directory, in the order `ls -f` lists
#: them. Values end in a newline as sysfs values do, except file_name.
ATTRIBUTES: dict[str, Attribute] = {
    # The kernel's, from config space and the profile.
    "vendor": lambda ipu: f"0x{_reg(ipu, 'VENDOR_ID'):04x}\n",
    "device": lambda ipu: f"0x{_reg(ipu, 'DEVICE_ID'):04x}\n",
    "subsystem_vendor": lambda ipu: f"0x{_reg(ipu, 'VENDOR_ID'):04x}\n",
    "subsystem_device": lambda ipu: f"0x{_reg(ipu, 'BOARD_TYPE'):04x}\n",
    "class": lambda ipu: f"0x{PCI_CLASS:06x}\n",
    "numa_node": lambda ipu: f"{_reg(ipu, 'NUMA_NODE')}\n",
    "resource": _resource,
    "current_link_speed": lambda ipu: ("Unknown\n" if ipu.link_down else
                                       _link_speed(_reg(ipu, "LINK_SPEED")) + "\n"),
    "current_link_width": lambda ipu: f"{0 if ipu.link_down else _reg(ipu, 'LINK_WIDTH')}\n",
    "max_link_speed": lambda ipu: _link_speed(ipu.profile.link_speed_tenths) + "\n",
    "max_link_width": lambda ipu: f"{ipu.profile.link_width}\n",
    # The Graphcore driver's.
    "file_name": lambda ipu: str(ipu.index),
    "board_name": lambda ipu: f"{ipu.profile.board_type}\n",
    "board_variant_name": lambda ipu: f"{ipu.profile.board_type}\n",
    "serial": lambda ipu: _serial(ipu) + "\n",
    "firmware_version": lambda ipu: _version(ipu.icu.board.firmware) + "\n",
    "firmware_version_int": lambda ipu: "%d\n" % (ipu.icu.board.firmware[0] << 16 | ipu.icu.board.firmware[1] << 8
                                                  | ipu.icu.board.firmware[2]),
    "bootloader_version": lambda ipu: _version(ipu.icu.board.bootloader) + "\n",
    "parity_init_flag": lambda ipu: f"{_reg(ipu, 'PARITY_INIT')}\n",
    "continuous_memory_nodes": _continuous_memory,
    # ipufs's own: what gc-info reports that no known attribute carries.
    "ipu_error_state": lambda ipu: _error_state(ipu) + "\n",
    "reset_count": lambda ipu: f"{_reg(ipu, 'RESET_COUNT')}\n",
}

#: The hwmon attributes (Documentation/hwmon/sysfs-interface units):
#: millidegrees Celsius, microwatts, hertz.
HWMON: dict[str, Attribute] = {
    "name": lambda ipu: "ipu\n",
    "temp1_input": lambda ipu: f"{ipu.icu.board.temperature_mc}\n",
    "power1_input": lambda ipu: f"{ipu.icu.board.power_mw * 1000}\n",
    "freq1_input": lambda ipu: f"{ipu.icu.board.clock_mhz * 1_000_000}\n",
}


TABLES: dict[str, dict[str, Attribute]] = {"device": ATTRIBUTES, "hwmon": HWMON}


def build(tree: NodeTree) -> None:
    """Add the view to ``tree``: sys/bus/pci/devices/ADDR/ for every IPU,
    with its attributes, its driver link and hwmon/hwmonN/."""
    parent = ROOT_INO
    for name in compat.DEVICES_PATH:
        parent = tree.add(parent, name, Kind.DIRECTORY).ino
    for index in range(tree.count):
        device = tree.add(parent, pci_address(index), Kind.DIRECTORY).ino
        for name in ATTRIBUTES:
            tree.add(device, name, Kind.ATTRIBUTE, ipu=index, table="device")
        tree.add(device, "driver", Kind.LINK, target=DRIVER_LINK)
        hwmon = tree.add(tree.add(device, "hwmon", Kind.DIRECTORY).ino, f"hwmon{index}", Kind.DIRECTORY).ino
        for name in HWMON:
            tree.add(hwmon, name, Kind.ATTRIBUTE, ipu=index, table="hwmon")


def read(ipu: Ipu, table: str, name: str) -> bytes:
    """The content of attribute ``name`` (of ``table``) of ``ipu`` now."""
    return TABLES[table][name](ipu).encode()
