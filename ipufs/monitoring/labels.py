# The attribute labels of Graphcore's IPU Info library (gcipuinfo, "Attribute
# labels"): a constant per attribute, whose value is the key gc-info prints.
# Graphcore's power-consumption example names IpuPower ("ipu power")
# and BoardType ("board type"); every other constant's name follows the same
# rule, the key's words capitalised and joined, "(bytes)" left out and
# "(session)" kept as "Session" (docs/monitoring.md lists them all).
from __future__ import annotations

#: The keys `ipufs info` prints, in gc-info's order (ipufs/tools/info.py).
KEYS: tuple[str, ...] = (
    "id", "target", "average board temp", "average die temp", "board ipu index",
    "board serial number", "board type", "board variant", "clock", "driver version",
    "firmware major version", "firmware minor version", "firmware patch version", "firmware version",
    "hexoatt active size (bytes)", "hexoatt total size (bytes)", "hexopt active size (bytes)",
    "hexopt total size (bytes)", "icu bootloader version", "ipu architecture", "ipu error state",
    "ipu power", "ipu utilisation", "ipu utilisation (session)", "link correctable error count",
    "link correctable error count (session)", "link speed", "link width", "numa node",
    "parity error count threshold", "parity error threshold interval", "parity initialised", "pci id",
    "pcie physical slot", "process start time", "remote buffers supported", "sysfs file id", "total board power",
    "user executable", "user name", "user process id",
)


def constant_name(key: str) -> str:
    """The label constant's name for a key: "ipu power" -> IpuPower."""
    words = key.replace("(bytes)", "").replace("(session)", "session").split()
    return "".join(w[:1].upper() + w[1:] for w in words)


#: Constant name -> key, for every attribute.
LABELS: dict[str, str] = {constant_name(k): k for k in KEYS}
#: The value of an attribute that has no meaning on a device, as gc-info
#: prints it ("ipu power: N/A" on a C600).
NA = "N/A"
