# The IPUs a device plugin offers: every IPU of one ipufs mount, found as
# the tools find them (ipufs/tools/devices.py), with the NUMA node each
# reports and the multi-IPU groups `ipufs ls` lists (ipufs/tools/listing.py).
# Device ids are the nodes' names, "ipu0", "ipu1"...
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ipufs.tools import devices, listing

PREFIX = "ipu"
#: The extended resource the plugin offers the IPUs as, unless told otherwise.
DEFAULT_RESOURCE = "graphcore.ai/ipu"


class InventoryError(ValueError):
    """The nodes cannot be offered as they are; the message says why."""


@dataclass(frozen=True)
class Inventory:
    root: Path  # where the nodes were found (a mount, or /dev with links)
    mountpoint: str  # the mount that serves them
    ipus: tuple[int, ...]
    numa: dict[int, int]  # IPU -> NUMA node
    groups: tuple[tuple[int, ...], ...]  # multi-IPU groups: same board, aligned

    def ids(self) -> list[str]:
        return [device_id(i) for i in self.ipus]


def device_id(ipu: int) -> str:
    return f"{PREFIX}{ipu}"


def ipu_of(device: str) -> int | None:
    """The IPU a device id names, or None if it names none."""
    digits = device[len(PREFIX):]
    if not device.startswith(PREFIX) or not digits.isdigit() or digits != str(int(digits)):
        return None
    return int(digits)


def discover(root: Path) -> Inventory:
    """Read what ``root`` holds now (OSError when its mount is gone, a
    tools Problem when it holds no IPU)."""
    ipus = devices.indices(root)
    mounts = sorted({devices.mountpoint_of(root, i) for i in ipus})
    if len(mounts) > 1:
        raise InventoryError(f"the IPUs in {root} come from several mounts ({', '.join(mounts)}): "
                             "run one device plugin per mount, each with --dev MOUNTPOINT")
    numa = {i: devices.registers(root, i)["NUMA_NODE"] for i in ipus}
    groups = tuple(tuple(members) for _, members in listing.listing(root).groups)
    return Inventory(root, mounts[0], tuple(ipus), numa, groups)
