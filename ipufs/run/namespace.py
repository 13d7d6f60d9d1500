# The private view `ipufs run` gives a command: in a mount namespace of its
# own (and a user namespace, for an unprivileged user), a /dev holding the
# host's devices plus the emulated IPUs' nodes, a /sys whose PCI bus holds
# only those IPUs, and udev's database entries for them (docs/compat.md).
#
# The host's /dev is devtmpfs, one instance shared by every mount namespace:
# a file created in it would appear on the host. So the new /dev is a tmpfs,
# built aside and moved over /dev: each host device is bind-mounted onto an
# empty file (a device node made in a tmpfs of a user namespace could not be
# opened, a bind of the host's can), each directory (pts, shm, mqueue...) is
# bound whole, each link copied; the nodes are bound from the mount.
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from ipufs import native
from ipufs.run.grafts import Grafts, fill_like

_IPU_NAME = re.compile(r"ipu[0-9]+(_ex|_mailbox|_mem)?")
NODE_SUFFIXES = ("", "_ex", "_mailbox", "_mem")


def enter(user: bool) -> None:
    """Move this process into a new mount namespace (and a new user
    namespace mapping our own ids to themselves, when ``user``) whose
    mounts do not propagate back to the host. This process must have one
    thread: the kernel refuses a new user namespace otherwise."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"cannot enter a new namespace from a process with {threads} threads")
    uid, gid = os.geteuid(), os.getegid()
    native.unshare(native.CLONE_NEWNS | (native.CLONE_NEWUSER if user else 0))
    if user:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    native.mount("none", "/", "", native.MS_REC | native.MS_SLAVE, "")


def build_dev(staging: Path, nodes: dict[str, str]) -> None:
    """Make ``staging`` (an empty directory) a tmpfs holding what the host's
    /dev holds, except its IPU names, plus ``nodes`` (name -> the file to
    bind there), then move it over /dev."""
    native.mount("tmpfs", str(staging), "tmpfs", native.MS_NOSUID, "mode=0755")
    # The host's IPUs (links of a running daemon) are left out: ours replace them.
    fill_like(staging, Path("/dev"), skip=lambda name: _IPU_NAME.fullmatch(name) is not None)
    for name, source in nodes.items():
        (staging / name).touch()
        native.mount(source, str(staging / name), "", native.MS_BIND, "")
    native.mount(str(staging), "/dev", "", native.MS_MOVE, "")


#: Directories of the view whose entries join the host's (the rest of the
#: view's directories replace the host's: its PCI bus shows only the IPUs).
MERGED = {"", "bus", "devices", "class", "dev", "dev/char"}
SYSFS = Path("/sys")
#: Where udev keeps its database, one file per device (umockdev's testbed
#: fills the same): "c" MAJ:MIN for a character device, "+pci:" ADDRESS.
UDEV_DATA = Path("/run/udev/data")


def show_sysfs(view: Path, grafts: Grafts, relative: str = "") -> None:
    """Show ``view`` (a mount's sys directory) in /sys: /sys/bus/pci
    replaced, the IPUs' root buses, class and device numbers added."""
    for entry in sorted(os.scandir(view / relative), key=lambda e: e.name):
        name = f"{relative}/{entry.name}".lstrip("/")
        if entry.is_symlink():
            grafts.link(os.readlink(entry.path), SYSFS / name)
        elif name in MERGED:
            show_sysfs(view, grafts, name)
        else:
            grafts.bind(Path(entry.path), SYSFS / name)


def udev_entries(view: Path) -> dict[str, str]:
    """udev's database entries (name -> content) for the devices of
    ``view``: each PCI device, and each class device of its nodes. They
    say the devices are initialised (I:, when in CLOCK_MONOTONIC µs) and
    carry what udev's own rules would add (the PCI path, pci.ids's names)."""
    now = time.monotonic_ns() // 1000

    def path(address: str) -> str:
        return f"E:ID_PATH=pci-{address}\nE:ID_PATH_TAG=pci-{re.sub('[:.]', '_', address)}\n"

    entries = {f"+pci:{address}": (f"I:{now}\n{path(address)}E:ID_VENDOR_FROM_DATABASE=Graphcore Ltd\n"
                                   "E:ID_PCI_CLASS_FROM_DATABASE=Processing accelerators\nV:1\n")
               for address in sorted(os.listdir(view / "bus" / "pci" / "devices"))}
    for link in sorted((view / "dev" / "char").iterdir()):
        # ../../devices/pciDDDD:BB/ADDRESS/CLASS/NAME
        address = Path(os.readlink(link)).parts[4]
        entries[f"c{link.name}"] = f"I:{now}\n{path(address)}V:1\n"
    return entries


def write_udev_data(entries: dict[str, str], grafts: Grafts) -> None:
    """Put ``entries`` in /run/udev/data (made ours: the host's stays)."""
    for name, content in entries.items():
        grafts.write(UDEV_DATA / name, content)


def node_files(root: Path, indices: list[int]) -> dict[str, str]:
    """The nodes of IPUs ``indices`` found in ``root`` (a mount or a
    directory of links to one), name -> real path."""
    return {f"ipu{i}{s}": os.path.realpath(root / f"ipu{i}{s}") for i in indices for s in NODE_SUFFIXES}
