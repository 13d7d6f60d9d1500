# The sysfs view's tree (ipufs/driver/sysfs_tree.py) is laid out as sysfs:
# every link resolves inside it, the bus lists its devices and the driver
# its bound ones as links into the devices tree, and each node has a class
# device reached from /sys/dev/char by its number.
from __future__ import annotations

import os
import posixpath

from ipufs.driver import sysfs_tree
from ipufs.driver.nodes import ROOT_INO, Kind, NodeTree


def _tree(count: int) -> NodeTree:
    tree = NodeTree(count)
    sysfs_tree.build(tree)
    return tree


def _path(tree: NodeTree, ino: int) -> str:
    names = []
    while ino != ROOT_INO:
        entry = tree.entry(ino)
        names.append(entry.name)
        ino = entry.parent
    return "/" + "/".join(reversed(names))


def _resolve(tree: NodeTree, path: str, depth: int = 0) -> int:
    """The inode at ``path``, following links as the kernel would."""
    assert depth < 8, path
    ino = ROOT_INO
    parts = [p for p in path.split("/") if p]
    for i, name in enumerate(parts):
        found = tree.lookup(ino, name)
        assert found is not None, f"{path}: no {name}"
        entry = tree.entry(found)
        if entry.kind is Kind.LINK:
            here = "/" + "/".join(parts[:i])
            rest = "/".join(parts[i + 1:])
            return _resolve(tree, posixpath.normpath(posixpath.join(here, entry.target, rest)), depth + 1)
        ino = found
    return ino


def test_every_link_resolves_inside_the_view() -> None:
    tree = _tree(3)
    links = [e for e in tree.entries() if e.kind is Kind.LINK]
    assert links
    for link in links:
        target = _resolve(tree, _path(tree, link.ino))
        assert tree.entry(target).kind is Kind.DIRECTORY, _path(tree, link.ino)


def test_bus_driver_class_and_device_numbers_lead_to_the_same_directories() -> None:
    tree = _tree(2)
    device = _resolve(tree, "/sys/bus/pci/devices/0000:1b:00.0")
    assert _path(tree, device) == "/sys/devices/pci0000:1b/0000:1b:00.0"
    assert _resolve(tree, "/sys/bus/pci/drivers/ipu/0000:1b:00.0") == device
    assert _path(tree, _resolve(tree, "/sys/devices/pci0000:1b/0000:1b:00.0/driver")) == "/sys/bus/pci/drivers/ipu"
    assert _path(tree, _resolve(tree, "/sys/devices/pci0000:1b/0000:1b:00.0/subsystem")) == "/sys/bus/pci"
    for k, name in enumerate(("ipu1", "ipu1_ex", "ipu1_mailbox", "ipu1_mem")):
        by_number = _resolve(tree, f"/sys/dev/char/240:{4 + k}")
        assert _path(tree, by_number) == f"/sys/devices/pci0000:1b/0000:1b:00.0/ipu/{name}"
        assert _resolve(tree, f"/sys/class/ipu/{name}") == by_number
        assert _resolve(tree, f"/sys/class/ipu/{name}/device") == device
        assert _path(tree, _resolve(tree, f"/sys/class/ipu/{name}/subsystem")) == "/sys/class/ipu"
        assert node_number(tree, by_number) == os.makedev(240, 4 + k)


def node_number(tree: NodeTree, class_device: int) -> int:
    children = tree.entry(class_device).children
    assert children is not None and {"dev", "uevent"} <= set(children)
    node = tree.by_name(tree.entry(class_device).name)
    assert node is not None
    return node.rdev


def test_each_hwmon_is_a_class_device_found_from_class_hwmon() -> None:
    """As hwmon_device_register makes one: /sys/class/hwmon/hwmonN leads to
    it, and its device and subsystem links lead to the PCI device and the
    class (what libsensors and udev follow)."""
    tree = _tree(2)
    for index in range(2):
        hwmon = _resolve(tree, f"/sys/class/hwmon/hwmon{index}")
        assert _path(tree, hwmon) == f"/sys/devices/pci0000:{0x1a + index:02x}/0000:{0x1a + index:02x}:00.0/hwmon/hwmon{index}"
        assert _path(tree, _resolve(tree, f"/sys/class/hwmon/hwmon{index}/device")) == \
            f"/sys/devices/pci0000:{0x1a + index:02x}/0000:{0x1a + index:02x}:00.0"
        assert _resolve(tree, f"/sys/class/hwmon/hwmon{index}/subsystem") == _resolve(tree, "/sys/class/hwmon")
        assert tree.lookup(hwmon, "uevent") is not None and tree.lookup(hwmon, "temp1_input") is not None
