# `ipufs info`: one IPU's attributes, shaped like `gc-info --device-info`
# ("Device Info:", then `key: value` lines indented by two spaces, the keys
# in the order of the C600 sample of Graphcore's command-line tools
# documentation). Each value is read as a real tool reads it:
# config registers by pread, the ICU by mailbox ioctl, the ipuN_mem node's
# st_blocks, and what only the daemon knows from its control channel.
# What ipufs cannot know is "N/A", as gc-info prints it (docs/tools.md).
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
import time
from typing import Any

from ipufs.abi.pci import pci_address
from ipufs import __version__
from ipufs.abi import ioctls
from ipufs.abi.icu import Op
from ipufs.abi.ipu_view import IpuView
from ipufs.abi.registers import ARCH_CODES, BOARD_CODES, STATUS_ICU_UNRESPONSIVE, ExceptionCause
from ipufs.abi.serial import serial_text
from ipufs.client.bars import bar_size
from ipufs.tools import devices

ARCH_NAMES = {v: k for k, v in ARCH_CODES.items()}
BOARD_NAMES = {v: k for k, v in BOARD_CODES.items()}
NA = "N/A"
#: What one attachment may give the device by ATTACH_BUFFER: the driver's
#: limits, reported as the "hexoatt" (host exchange translation) total.
HEXOATT_TOTAL = ioctls.MAX_BUFFERS * ioctls.MAX_BUFFER_LENGTH
#: "target" by board type: an IPU-Machine's IPUs are reached over its
#: fabric (Graphcore's M2000 sample prints "target: Fabric"), a card's over PCIe.
TARGETS = {"M2000": "Fabric"}


@dataclass(frozen=True, slots=True)
class Field:
    """One attribute: gc-info's key, the text it prints, and for --json a
    key a program can use and the value typed (None where N/A)."""

    key: str
    text: str
    json_key: str
    value: Any


def _field(key: str, value: Any, unit: str = "", fmt: str = "{}") -> Field:
    json_key = key.replace(" (bytes)", "_bytes").replace(" (session)", "_session").replace(" ", "_")
    if unit:
        json_key += "_" + unit.strip().lower().replace("%", "percent")
    text = NA if value is None else fmt.format(value) + unit
    return Field(key, text, json_key, value)


def _version(word: int) -> tuple[int, int, int]:
    return word >> 16, (word >> 8) & 0xFF, word & 0xFF


def fields(root: Path, index: int) -> list[Field]:
    """gc-info --device-info's attributes of IPU ``index``."""
    return fields_from(root, index, devices.registers(root, index), devices.daemon_view(root, index))


def fields_from(root: Path, index: int, r: dict[str, int], view: IpuView | None) -> list[Field]:
    """The attributes of IPU ``index`` given its config registers ``r``
    (devices.registers) and the daemon's view of it (devices.daemon_view),
    read once by a caller that needs them too; the ICU and the ipuN_mem
    node are read here."""
    icu_down = bool(r["STATUS"] & STATUS_ICU_UNRESPONSIVE)
    asked = ((Op.READ_FIRMWARE_VERSION,), (Op.READ_IMAGE_VERSION, 2), (Op.READ_POWER,), (Op.READ_TEMPERATURE,))
    fw, boot, power, temperature = [None] * len(asked) if icu_down else devices.icu(root, index, *asked)
    # The ICU answers (major | minor << 16, patch); None while it does not.
    # Versions are in config space too: while the ICU is silent, say those.
    firmware = (fw[1] & 0xFFFF, fw[1] >> 16, fw[2]) if fw else _version(r["FIRMWARE_VERSION"])
    loader = (boot[1] & 0xFFFF, boot[1] >> 16, boot[2]) if boot else _version(r["BOOTLOADER_VERSION"])
    bootloader = ".".join(map(str, loader))
    error = r["ERROR_STATE"]
    attached = view["attached"] if view else None
    mem = _memory(root, index)
    session_use = view["session_use"] if view else None
    board = BOARD_NAMES.get(r["BOARD_TYPE"], "unknown")
    started = _start_time(attached["pid"]) if attached and attached["pid"] is not None else None
    out = [
        _field("id", index),
        _field("target", TARGETS.get(board, "PCIe")),
        _field("average board temp", temperature[1] / 1000 if temperature else None, " C", "{:.1f}"),
        _field("average die temp", r["TEMPERATURE"] / 1000, " C", "{:.1f}"),
        _field("board ipu index", r["BOARD_IPU_INDEX"]),
        _field("board serial number", serial_text(r["BOARD_SERIAL_HI"] << 32 | r["BOARD_SERIAL_LO"])),
        _field("board type", board),
        _field("board variant", board if r["BOARD_VARIANT"] == 1 else str(r["BOARD_VARIANT"])),
        _field("clock", r["CLOCK"], "MHz"),
        _field("driver version", __version__),
        _field("firmware major version", firmware[0]),
        _field("firmware minor version", firmware[1]),
        _field("firmware patch version", firmware[2]),
        _field("firmware version", ".".join(map(str, firmware))),
        _field("hexoatt active size (bytes)", attached.get("buffer_bytes", 0) if attached else 0),
        _field("hexoatt total size (bytes)", HEXOATT_TOTAL),
        _field("hexopt active size (bytes)", mem[0]),
        _field("hexopt total size (bytes)", mem[1]),
        _field("icu bootloader version", bootloader),
        _field("ipu architecture", ARCH_NAMES.get(r["ARCH"], "unknown")),
        _field("ipu error state", "no errors" if error == 0 else _cause(error)),
        _field("ipu power", r["IPU_POWER"] / 1000 if r["IPU_POWER"] else None, "W", "{:.2f}"),
        _field("ipu utilisation", r["UTILISATION"] / 100, "%", "{:.2f}"),
        _field("ipu utilisation (session)", None if session_use is None else session_use * 100, "%", "{:.2f}"),
        _field("link correctable error count", view["link_errors"] if view else None),
        _field("link correctable error count (session)", view["link_errors_session"] if view else None),
        _field("link speed", r["LINK_SPEED"] / 10, " GT/s", "{:.1f}"),
        _field("link width", r["LINK_WIDTH"]),
        _field("numa node", r["NUMA_NODE"]),
        _field("parity error count threshold", None),  # ipufs takes no IPU out of use for parity errors
        _field("parity error threshold interval", None),
        _field("parity initialised", r["PARITY_INIT"]),
        _field("pci id", pci_address(index)),
        _field("pcie physical slot", index // max(1, r["GROUP_SIZE"])),
        *([Field("process start time", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)),
                 "process_start_time", started)] if started is not None else []),
        _field("remote buffers supported", 1),
        _field("sysfs file id", index),
        _field("total board power", power[1] / 1000 if power else None, " W", "{:.1f}"),
    ]
    if attached:
        pid = attached["pid"]  # None: not in this PID namespace (N/A)
        out += [
            _field("user executable", _executable(pid) if pid is not None else attached.get("command") or None),
            _field("user name", attached["user"]),
            _field("user process id", pid),
        ]
    return out


def _memory(root: Path, index: int) -> tuple[int, int]:
    """The bytes the ipuN_mem node's memory holds (its blocks) and its size
    (asked of the file: where the nodes are character devices their stat
    says 0, as a real one's)."""
    fd = os.open(root / f"ipu{index}_mem", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.fstat(fd).st_blocks * 512, bar_size(fd)
    finally:
        os.close(fd)


def _cause(error: int) -> str:
    try:
        return ExceptionCause(error).name.lower()
    except ValueError:
        return f"error {error}"


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch (None when
    it cannot be read): its start in clock ticks after boot (/proc/PID/stat)
    plus the boot time (/proc/stat's btime)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _executable(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return "unknown"


def render(infos: list[list[Field]]) -> str:
    """gc-info's layout: a "Device Info:" line per device, keys indented."""
    return "\n".join("Device Info:\n" + "\n".join(f"  {f.key}: {f.text}" for f in info) for info in infos)


def as_dict(info: list[Field]) -> dict[str, Any]:
    return {f.json_key: f.value for f in info}
