# `ipufs ls`: the device listing, shaped like `gc-info -l`: every IPU as a
# PCIe device, then the multi-IPU devices of each board (aligned groups of
# 2, 4, ... up to the board), numbered after the single ones, the smaller
# groups first: Graphcore's samples number a pair before a four (an
# IPU-M2000's ids 4 and 5 are pairs, 6 the four), and on an 8-IPU C600
# system id 12 is IPUs 0 to 3 (docs.graphcore.ai, command-line tools:
# gc-info; "C600 PCIe Device IDs").
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ipufs.abi.pci import pci_address
from ipufs.tools import devices
from ipufs.problems import USAGE, Problem


@dataclass
class Listing:
    singles: list[tuple[int, str]]  # (id, PCI address)
    groups: list[tuple[int, list[int]]]  # (id, member IPU ids)

    def members(self, device_id: int) -> list[int]:
        """The IPUs of device ``device_id``: itself, or a multi-IPU
        device's members; a Problem naming the valid ids otherwise."""
        for index, _ in self.singles:
            if index == device_id:
                return [index]
        for group_id, members in self.groups:
            if group_id == device_id:
                return members
        ids = _ranges([i for i, _ in self.singles])
        groups = f", multi-IPU devices {_ranges([g for g, _ in self.groups])}" if self.groups else ""
        raise Problem(f"no device {device_id}", f"the devices are IPUs {ids}{groups} (`ipufs ls` lists them)",
                      status=USAGE)


def _ranges(ids: list[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]}-{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 1 else \
        ", ".join(map(str, ids))


def listing(root: Path) -> Listing:
    ipus = devices.indices(root)
    boards: dict[int, list[int]] = {}
    for index in ipus:
        r = devices.registers(root, index)
        boards.setdefault(r["BOARD_SERIAL_HI"] << 32 | r["BOARD_SERIAL_LO"], []).append(index)
    groups: list[tuple[int, list[int]]] = []
    next_id = max(ipus) + 1
    largest = max(len(members) for members in boards.values())
    size = 2
    while size <= largest:
        for members in boards.values():
            for start in range(0, len(members) - size + 1, size):
                groups.append((next_id, members[start : start + size]))
                next_id += 1
        size *= 2
    return Listing([(i, pci_address(i)) for i in ipus], groups)


def render(result: Listing) -> str:
    lines = ["Graphcore device listing:"]
    for index, address in result.singles:
        lines.append(f"-+- Id: {f'[{index}]':>4}, type: {'[PCIe]':>11}, PCI Domain: [{address}]")
    for group_id, members in result.groups:
        lines.append(f"-+- Id: {f'[{group_id}]':>4}, type: {'[Multi IPU]':>11}")
        for dnc, member in enumerate(members):
            lines.append(f" |--- PCIe Id: {f'[{member}]':>4}, DNC Id: [{dnc}], "
                         f"PCI Domain: [{pci_address(member)}]")
    return "\n".join(lines)


def as_dict(result: Listing) -> dict[str, object]:
    return {
        "devices": [{"id": i, "type": "PCIe", "pci_domain": a} for i, a in result.singles]
        + [{"id": g, "type": "Multi IPU", "members": m} for g, m in result.groups],
    }
