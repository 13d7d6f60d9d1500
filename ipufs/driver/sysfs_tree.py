# The sysfs view's tree, laid out as the kernel lays out sysfs, so that
# tools which walk it (lspci, hwloc, lshw, udev's libraries) find what they
# find on a machine with IPUs (docs/sysfs.md):
#
#   sys/devices/pciDDDD:BB/            the root bus of each IPU (uevent)
#       DDDD:BB:00.0/                  the PCI device: attributes, config,
#           driver -> bus/pci/drivers/ipu, subsystem -> bus/pci,
#           hwmon/hwmonN               a hwmon class device: its sensors,
#                                      uevent, device, subsystem
#           ipu/ipuN, ipu/ipuN_ex...   a class device per node: dev, uevent,
#                                      device -> the PCI device, subsystem
#   sys/bus/pci/devices/ADDR           -> the PCI device
#   sys/bus/pci/drivers/ipu/ADDR       -> the PCI device (the bound devices)
#   sys/bus/pci/slots/                 empty: no physical slots
#   sys/class/ipu/ipuN...              -> the class devices
#   sys/class/hwmon/hwmonN             -> the hwmon class devices
#   sys/dev/char/MAJ:MIN               -> the class devices
#
# Links are relative, as the kernel makes them, so they resolve wherever
# the tree is seen: in the mount, or bound at /sys by `ipufs run`.
from __future__ import annotations

import os

from ipufs.abi.pci import pci_address, root_bus
from ipufs.driver import sysfs
from ipufs.driver.nodes import ROOT_INO, SUFFIXES, Kind, NodeTree


def _directory(tree: NodeTree, parent: int, *names: str) -> int:
    """The directory PARENT/NAMES..., made where missing."""
    for name in names:
        found = tree.lookup(parent, name)
        parent = found if found is not None else tree.add(parent, name, Kind.DIRECTORY).ino
    return parent


def device_link(index: int) -> str:
    """IPU ``index``'s PCI device directory, from sys/devices."""
    return f"{root_bus(index)}/{pci_address(index)}"


def build(tree: NodeTree) -> None:
    """Add the view to ``tree``, under sys/ of its root."""
    sys_ = _directory(tree, ROOT_INO, "sys")
    devices = _directory(tree, sys_, "devices")
    bus_devices = _directory(tree, sys_, "bus", "pci", "devices")
    bound = _directory(tree, sys_, "bus", "pci", "drivers", sysfs.DRIVER)
    _directory(tree, sys_, "bus", "pci", "slots")
    klass = _directory(tree, sys_, "class", sysfs.CHAR_CLASS)
    hwmon_class = _directory(tree, sys_, "class", "hwmon")
    char = _directory(tree, sys_, "dev", "char")
    for index in range(tree.count):
        address = pci_address(index)
        bus = _directory(tree, devices, root_bus(index))
        tree.add(bus, "uevent", Kind.ATTRIBUTE, ipu=index, table="bus")
        device = _directory(tree, bus, address)
        for name in sysfs.ATTRIBUTES:
            tree.add(device, name, Kind.ATTRIBUTE, ipu=index, table="device")
        for name in sysfs.BINARY_NAMES:
            tree.add(device, name, Kind.ATTRIBUTE, ipu=index, table=sysfs.BINARY)
        tree.add(device, "driver", Kind.LINK, target=f"../../../bus/pci/drivers/{sysfs.DRIVER}")
        tree.add(device, "subsystem", Kind.LINK, target="../../../bus/pci")
        # A hwmon class device, as the kernel's hwmon_device_register makes
        # one: `sensors` (libsensors), node_exporter and udev find it
        # through /sys/class/hwmon.
        hwmon = _directory(tree, device, "hwmon", f"hwmon{index}")
        for name in sysfs.HWMON:
            tree.add(hwmon, name, Kind.ATTRIBUTE, ipu=index, table="hwmon")
        tree.add(hwmon, "device", Kind.LINK, target=f"../../../{address}")
        tree.add(hwmon, "subsystem", Kind.LINK, target="../../../../../class/hwmon")
        tree.add(hwmon_class, f"hwmon{index}", Kind.LINK, target=f"../../devices/{device_link(index)}/hwmon/hwmon{index}")
        for region, suffix in SUFFIXES.items():
            node = tree.node(index, region)
            class_device = _directory(tree, device, sysfs.CHAR_CLASS, node.name)
            for name in sysfs.TABLES["char" + suffix]:
                tree.add(class_device, name, Kind.ATTRIBUTE, ipu=index, table="char" + suffix)
            tree.add(class_device, "device", Kind.LINK, target=f"../../../{address}")
            tree.add(class_device, "subsystem", Kind.LINK, target=f"../../../../../class/{sysfs.CHAR_CLASS}")
            path = f"../../devices/{device_link(index)}/{sysfs.CHAR_CLASS}/{node.name}"
            tree.add(klass, node.name, Kind.LINK, target=path)
            tree.add(char, f"{os.major(node.rdev)}:{os.minor(node.rdev)}", Kind.LINK, target=path)
        tree.add(bus_devices, address, Kind.LINK, target=f"../../../devices/{device_link(index)}")
        tree.add(bound, address, Kind.LINK, target=f"../../../../devices/{device_link(index)}")


def node_tree(count: int) -> NodeTree:
    """The whole tree of ``count`` IPUs: their nodes and the sysfs view,
    built before anyone is given it."""
    tree = NodeTree(count)
    build(tree)
    return tree
