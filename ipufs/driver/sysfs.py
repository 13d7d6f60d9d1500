# The sysfs view's attribute files: for every IPU, what the kernel and the
# Graphcore driver publish in its PCI device directory, the attributes of
# the class devices of its four nodes, read live from the model at each
# read (the tree they sit in: sysfs_tree.py).
#
# Facts (aspen/sdk/src/driver/discovery.rs of the public research repository
# github.com/Saghetti0/graphcore-ipu-research, and the pci.ids database): the
# kernel's attributes of a PCI device (vendor, device, subsystem ids, class,
# numa_node, resource, link speed and width, a driver link) and the names of
# the driver's own (file_name, board_name, ..., continuous_memory_nodes);
# aspen-sdk reads file_name and parses all of it as a number, so it carries
# no newline. Formats of the kernel's attributes follow its pci-sysfs.c and
# core.c (uevent, dev); what no source tells (the driver's formats, BAR
# addresses, subsystem device, class, the driver's and the class's names)
# is ipufs's own, in docs/sysfs.md.
from __future__ import annotations

import errno
import os
from collections.abc import Callable

from ipufs.abi import registers as R
from ipufs.abi.pci import pci_address
from ipufs.abi.serial import serial_text
from ipufs.driver import pci_config as pci
from ipufs.driver.nodes import SUFFIXES, Node
from ipufs.model.ipu import Ipu
from ipufs.model.profile import Profile, Region

#: What a read of a text attribute file reports as its size, as sysfs does.
ATTRIBUTE_SIZE = 4096
#: The driver's name, as its directory under bus/pci/drivers and the
#: `driver` link name it (ours: the real module's name is not public).
DRIVER = "ipu"
#: The class the driver's character devices belong to (ours, likewise).
CHAR_CLASS = "ipu"


def _node_cpus(node: int) -> tuple[str, str]:
    """The host's CPU mask and list of NUMA node ``node`` (as its sysfs
    says, or every CPU where the host has no such node)."""
    base = f"/sys/devices/system/node/node{node}/"
    try:
        with open(base + "cpumap") as mask, open(base + "cpulist") as cpus:
            return mask.read().strip(), cpus.read().strip()
    except OSError:
        count = os.cpu_count() or 1
        words = [((1 << count) - 1) >> shift & 0xFFFF_FFFF for shift in range(0, count, 32)]
        return ",".join(f"{w:08x}" for w in reversed(words)).lstrip("0") or "0", f"0-{count - 1}"


def _version(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def _link_speed(tenths: int) -> str:
    return f"{tenths / 10:.1f} GT/s PCIe"


def _resource(ipu: Ipu) -> str:
    ranges = {bar.number: (bar.start, bar.end, bar.flags) for bar in pci.bars(ipu.profile, ipu.index)}
    # A device that is not a bridge shows its six BARs and the ROM.
    return "".join("0x%016x 0x%016x 0x%016x\n" % ranges.get(bar, (0, 0, 0)) for bar in range(7))


def _modalias(ipu: Ipu) -> str:
    return (f"pci:v{pci.register_value(ipu, 'VENDOR_ID'):08X}d{pci.register_value(ipu, 'DEVICE_ID'):08X}"
            f"sv{pci.register_value(ipu, 'VENDOR_ID'):08X}sd{pci.register_value(ipu, 'BOARD_TYPE'):08X}"
            f"bc{pci.PCI_CLASS >> 16:02X}sc{pci.PCI_CLASS >> 8 & 0xFF:02X}i{pci.PCI_CLASS & 0xFF:02X}")


def _uevent(ipu: Ipu) -> str:
    vendor, device = pci.register_value(ipu, "VENDOR_ID"), pci.register_value(ipu, "DEVICE_ID")
    return (f"DRIVER={DRIVER}\nPCI_CLASS={pci.PCI_CLASS:X}\nPCI_ID={vendor:04X}:{device:04X}\n"
            f"PCI_SUBSYS_ID={vendor:04X}:{pci.register_value(ipu, 'BOARD_TYPE'):04X}\nPCI_SLOT_NAME={pci_address(ipu.index)}\n"
            f"MODALIAS={_modalias(ipu)}\n")


def _error_state(ipu: Ipu) -> str:
    error = pci.register_value(ipu, "ERROR_STATE")
    return "no errors" if error == 0 else R.ExceptionCause(error).name.lower()


def _ipu_power(ipu: Ipu) -> str:
    # As `ipufs info` prints it: N/A on boards that measure no single IPU.
    milliwatts = pci.register_value(ipu, "IPU_POWER")
    return f"{milliwatts / 1000:.2f}W" if milliwatts else "N/A"


def _serial(ipu: Ipu) -> str:
    # As `ipufs info` prints the board serial number.
    return serial_text(pci.register_value(ipu, "BOARD_SERIAL_HI") << 32 | pci.register_value(ipu, "BOARD_SERIAL_LO"))


def _continuous_memory(ipu: Ipu) -> str:
    bar = pci.bars(ipu.profile, ipu.index)[-1]
    return f"0x{bar.start:x}-0x{bar.start + ipu.profile.host_memory_size - 1:x}\n"


Attribute = Callable[[Ipu], str]

#: The attribute files of a device directory, in the order `ls -f` lists
#: them. Values end in a newline as sysfs values do, except file_name.
ATTRIBUTES: dict[str, Attribute] = {
    # The kernel's, from config space and the profile.
    "vendor": lambda ipu: f"0x{pci.register_value(ipu, 'VENDOR_ID'):04x}\n",
    "device": lambda ipu: f"0x{pci.register_value(ipu, 'DEVICE_ID'):04x}\n",
    "subsystem_vendor": lambda ipu: f"0x{pci.register_value(ipu, 'VENDOR_ID'):04x}\n",
    "subsystem_device": lambda ipu: f"0x{pci.register_value(ipu, 'BOARD_TYPE'):04x}\n",
    "revision": lambda ipu: f"0x{pci.REVISION:02x}\n",
    "class": lambda ipu: f"0x{pci.PCI_CLASS:06x}\n",
    "irq": lambda ipu: f"{pci.irq(ipu.index)}\n",
    "enable": lambda ipu: "1\n",
    "numa_node": lambda ipu: f"{pci.register_value(ipu, 'NUMA_NODE')}\n",
    "local_cpus": lambda ipu: _node_cpus(pci.register_value(ipu, "NUMA_NODE"))[0] + "\n",
    "local_cpulist": lambda ipu: _node_cpus(pci.register_value(ipu, "NUMA_NODE"))[1] + "\n",
    "modalias": lambda ipu: _modalias(ipu) + "\n",
    "uevent": _uevent,
    "resource": _resource,
    "current_link_speed": lambda ipu: ("Unknown\n" if ipu.link_down else
                                       _link_speed(pci.register_value(ipu, "LINK_SPEED")) + "\n"),
    "current_link_width": lambda ipu: f"{0 if ipu.link_down else pci.register_value(ipu, 'LINK_WIDTH')}\n",
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
    "parity_init_flag": lambda ipu: f"{pci.register_value(ipu, 'PARITY_INIT')}\n",
    "continuous_memory_nodes": _continuous_memory,
    # ipufs's own: what gc-info reports that no known attribute carries.
    "ipu_error_state": lambda ipu: _error_state(ipu) + "\n",
    "reset_count": lambda ipu: f"{pci.register_value(ipu, 'RESET_COUNT')}\n",
    "ipu_utilisation": lambda ipu: f"{pci.register_value(ipu, 'UTILISATION') / 100:.2f}%\n",
    "ipu_power": lambda ipu: _ipu_power(ipu) + "\n",
}

#: The hwmon class device's attributes (Documentation/hwmon/sysfs-interface
#: units: millidegrees Celsius, microwatts, hertz), and its uevent, empty
#: as a hwmon device's is.
HWMON: dict[str, Attribute] = {
    "name": lambda ipu: "ipu\n",
    "uevent": lambda ipu: "",
    "temp1_input": lambda ipu: f"{ipu.icu.board.temperature_mc}\n",
    "power1_input": lambda ipu: f"{ipu.icu.board.power_mw * 1000}\n",
    "freq1_input": lambda ipu: f"{ipu.icu.board.clock_mhz * 1_000_000}\n",
}


def _char_table(region: Region) -> dict[str, Attribute]:
    """The attributes of the class device of one node of an IPU."""
    def number(ipu: Ipu) -> tuple[int, int]:
        rdev = Node(0, ipu.index, region).rdev
        return os.major(rdev), os.minor(rdev)

    return {
        "dev": lambda ipu: "%d:%d\n" % number(ipu),
        "uevent": lambda ipu: "MAJOR=%d\nMINOR=%d\n" % number(ipu) + f"DEVNAME={Node(0, ipu.index, region).name}\n",
    }


#: Attribute tables by name: a device's, its hwmon's, the class devices'
#: of its nodes ("char", "char_ex"...) and a root bus's (an empty uevent).
TABLES: dict[str, dict[str, Attribute]] = {
    "device": ATTRIBUTES, "hwmon": HWMON, "bus": {"uevent": lambda ipu: ""},
    **{"char" + suffix: _char_table(region) for region, suffix in SUFFIXES.items()},
}
#: The table of a device's binary attributes: config space, then one
#: resourceN per BAR, which sysfs lets a program map but not read (EIO).
BINARY = "binary"
BINARY_NAMES = ("config", *(f"resource{n}" for n in (0, 2, pci.MSIX_TABLE_BAR, pci.MSIX_PBA_BAR)))


def read(ipu: Ipu, table: str, name: str, privileged: bool) -> bytes:
    """The content of attribute ``name`` (of ``table``) of ``ipu`` now.
    ``config`` is whole for a ``privileged`` reader, its first 64 bytes
    otherwise, as the kernel gives it with and without CAP_SYS_ADMIN;
    resourceN is OSError(EIO), as a memory BAR's is."""
    if table == BINARY:
        if name != "config":
            raise OSError(errno.EIO, "a memory BAR cannot be read, only mapped")
        space = pci.config_space(ipu)
        return space if privileged else space[:pci.UNPRIVILEGED_CONFIG_SIZE]
    return TABLES[table][name](ipu).encode()


def size(profile: Profile, table: str, name: str) -> int:
    """What stat reports as the size of attribute ``name``: a BAR's size for
    its resourceN, 4096 otherwise (config space, and every text file)."""
    if table == BINARY and name != "config":
        number = int(name[len("resource"):])
        return next(bar.size for bar in pci.bars(profile, 0) if bar.number == number)
    return ATTRIBUTE_SIZE
