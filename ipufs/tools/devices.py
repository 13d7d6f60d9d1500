# Finding the emulated IPUs a tool should look at, and reading what each
# says about itself through its nodes: config registers by pread, the ICU
# through the mailbox ioctl, and the daemon's control channel for what only
# the daemon knows (who is attached, signal counts).
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipufs.client import Control, ControlError, Device
from ipufs.abi.icu import ERROR_MARKER, Op, op_word
from ipufs.abi.registers import ARCH_CODES, BOARD_CODES, REGISTERS, ExceptionCause

ARCH_NAMES = {v: k for k, v in ARCH_CODES.items()}
BOARD_NAMES = {v: k for k, v in BOARD_CODES.items()}
FIRST_BUS = 0x1A


def default_root() -> Path:
    """Where the nodes are: /dev when /dev/ipu0 exists, else /run/ipufs."""
    return Path("/dev") if os.path.exists("/dev/ipu0") else Path("/run/ipufs")


def indices(root: Path) -> list[int]:
    found = set()
    for entry in os.listdir(root):
        if entry.startswith("ipu") and entry[3:].isdigit():
            found.add(int(entry[3:]))
    return sorted(found)


def pci_address(index: int) -> str:
    """ipufs's own PCI addresses: bus 0x1a + N, carried into the domain."""
    bus = FIRST_BUS + index
    return f"{bus >> 8:04x}:{bus & 0xFF:02x}:00.0"


def mountpoint_of(root: Path, index: int) -> str:
    return os.path.dirname(os.path.realpath(root / f"ipu{index}"))


def registers(root: Path, index: int) -> dict[str, int]:
    fd = os.open(root / f"ipu{index}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.pread(fd, 0x600, 0)
    finally:
        os.close(fd)
    return {name: int.from_bytes(data[r.offset : r.offset + 4], "little")
            for name, r in REGISTERS.items() if r.offset + 4 <= len(data)}


def icu(root: Path, index: int, op: int, *args: int) -> tuple[int, ...] | None:
    with Device(index, root) as dev:
        answer = dev.icu_transfer((op_word(op), *args, *([0] * (4 - len(args)))))
    return None if answer[0] == ERROR_MARKER else answer


def daemon_view(root: Path, index: int) -> dict[str, Any] | None:
    """The control channel's view of one IPU, or None when unreachable."""
    try:
        with Control.of_mount(mountpoint_of(root, index), timeout=2) as control:
            return control.request("ipu", ipu=index)
    except (OSError, ControlError, ValueError):
        return None


def _version(word: int) -> str:
    return f"{word >> 16}.{(word >> 8) & 0xFF}.{word & 0xFF}"


@dataclass
class DeviceInfo:
    index: int
    fields: dict[str, str]


def info(root: Path, index: int) -> DeviceInfo:
    """gc-info --device-info fields for IPU ``index``."""
    r = registers(root, index)
    fw = icu(root, index, Op.READ_FIRMWARE_VERSION)
    boot = icu(root, index, Op.READ_IMAGE_VERSION, 2)
    power = icu(root, index, Op.READ_POWER)
    temperature = icu(root, index, Op.READ_TEMPERATURE)
    error = r["ERROR_STATE"]
    serial = r["BOARD_SERIAL_HI"] << 32 | r["BOARD_SERIAL_LO"]
    from ipufs import __version__

    fields = {
        "id": str(index),
        "target": "PCIe",
        "board ipu index": str(r["BOARD_IPU_INDEX"]),
        "board serial number": f"{serial >> 16:04X}.{serial & 0xFFFF:04X}",
        "board type": BOARD_NAMES.get(r["BOARD_TYPE"], "unknown"),
        "board variant": str(r["BOARD_VARIANT"]),
        "clock": f"{r['CLOCK']}MHz",
        "driver version": f"ipufs {__version__}",
        "firmware version": f"{fw[1] & 0xFFFF}.{fw[1] >> 16}.{fw[2]}" if fw else _version(r["FIRMWARE_VERSION"]),
        "icu bootloader version": (f"{boot[1] & 0xFFFF}.{boot[1] >> 16}.{boot[2]}" if boot
                                   else _version(r["BOOTLOADER_VERSION"])),
        "ipu architecture": ARCH_NAMES.get(r["ARCH"], "unknown"),
        "ipu error state": "no errors" if error == 0 else ExceptionCause(error).name.lower(),
        "link speed": f"{r['LINK_SPEED'] / 10:.1f} GT/s",
        "link width": str(r["LINK_WIDTH"]),
        "numa node": str(r["NUMA_NODE"]),
        "parity initialised": str(r["PARITY_INIT"]),
        "pci id": f"[{pci_address(index)}]",
        "pcie physical slot": str(index // max(1, r["GROUP_SIZE"])),
        "sysfs file id": str(index),
        "total board power": f"{(power[1] if power else r['POWER']) / 1000:.1f} W",
        "ipu temperature": f"{(temperature[1] if temperature else r['TEMPERATURE']) / 1000:.1f} C",
        "tiles": str(r["TILE_COUNT"]),
        "reset count": str(r["RESET_COUNT"]),
    }
    view = daemon_view(root, index)
    attached = view.get("attached") if view else None
    if attached:
        fields["attached user executable"] = _executable(attached["pid"])
        fields["attached user name"] = attached["user"]
        fields["attached user process id"] = str(attached["pid"])
    return DeviceInfo(index, fields)


def _executable(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "unknown"
