# The names lspci and udev give the run's IPUs. They look a PCI device's ids
# up in the pci.ids database, which names Graphcore's vendor id and the C2's
# device (1d95:0001) but not the ids of ipufs's other profiles (0003, 0004:
# ipu21 and ipu2, the latter ipufs's own), so lspci said "Device 0004".
# `ipufs run` shows the command a pci.ids of its own where the host has one
# (docs/compat.md): the host's, with a line for each id of the run's IPUs
# it lacks, each saying it comes from ipufs; the host's file is never
# written (grafts.py). The lines go inside the vendor's block, since a
# second block of one vendor makes pciutils refuse the whole file.
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ipufs.run.grafts import Grafts

#: Where distributions keep the database (Debian: misc, Fedora: hwdata).
DATABASES = (Path("/usr/share/misc/pci.ids"), Path("/usr/share/hwdata/pci.ids"))
_VENDOR = re.compile(r"^([0-9a-f]{4})  ")
_DEVICE = re.compile(r"^\t([0-9a-f]{4})  ")
_SUBSYSTEM = re.compile(r"^\t\t([0-9a-f]{4}) ([0-9a-f]{4})  ")


@dataclass(frozen=True, slots=True)
class PciDevice:
    """The ids of one IPU as its sysfs directory gives them, and its board."""

    vendor: str
    device: str
    subsystem_vendor: str
    subsystem_device: str
    board: str


def devices(view: Path) -> list[PciDevice]:
    """The PCI devices of a mount's view (its sys directory), once each."""
    found: dict[tuple[str, ...], PciDevice] = {}
    for entry in sorted((view / "bus" / "pci" / "devices").iterdir()):
        def attribute(name: str) -> str:
            text = (entry / name).read_text().strip()
            return text[2:] if text.startswith("0x") else text

        d = PciDevice(attribute("vendor"), attribute("device"), attribute("subsystem_vendor"),
                      attribute("subsystem_device"), attribute("board_name"))
        found.setdefault((d.vendor, d.device, d.subsystem_vendor, d.subsystem_device), d)
    return list(found.values())


def amended(text: str, wanted: list[PciDevice], vendor_name: str = "Graphcore Ltd") -> str:
    """The database ``text`` with a line for each id of ``wanted`` it lacks."""
    lines = text.splitlines()
    for d in wanted:
        lines = _with(lines, d, vendor_name)
    return "\n".join(lines) + "\n"


def _with(lines: list[str], d: PciDevice, vendor_name: str) -> list[str]:
    vendor = next((i for i, line in enumerate(lines) if (m := _VENDOR.match(line)) and m.group(1) == d.vendor), None)
    device_line = f"\t{d.device}  Colossus IPU [{d.board}] (ipufs)"
    subsystem_line = f"\t\t{d.subsystem_vendor} {d.subsystem_device}  {d.board} (ipufs)"
    if vendor is None:  # a block of its own, before the device classes
        classes = next((i for i, line in enumerate(lines) if line.startswith("C ")), len(lines))
        return lines[:classes] + [f"{d.vendor}  {vendor_name}", device_line, subsystem_line] + lines[classes:]
    end = vendor + 1
    while end < len(lines) and (lines[end].startswith("\t") or lines[end].startswith("#") or not lines[end]):
        end += 1
    device = next((i for i in range(vendor + 1, end) if (m := _DEVICE.match(lines[i])) and m.group(1) == d.device),
                  None)
    if device is None:
        return lines[:end] + [device_line, subsystem_line] + lines[end:]
    after = device + 1
    while after < end and lines[after].startswith("\t\t"):
        m = _SUBSYSTEM.match(lines[after])
        if m and (m.group(1), m.group(2)) == (d.subsystem_vendor, d.subsystem_device):
            return lines  # named already
        after += 1
    return lines[:after] + [subsystem_line] + lines[after:]


def show(view: Path, grafts: Grafts) -> list[Path]:
    """Give the command's mount namespace a pci.ids that names the IPUs of
    ``view``, at each place the host has one; the places done."""
    wanted = devices(view)
    done = []
    for database in DATABASES:
        if database.is_file():
            grafts.write(database, amended(database.read_text(errors="replace"), wanted))
            done.append(database)
    return done
