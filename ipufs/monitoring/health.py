# The device health check of gcipuinfo ("Device health check"):
# checkHealthOfDevices() answers a JSON string, "{}" when every IPU is fit,
# else the failing IPUs by host, each with an "error" kind ("device" or
# "connection", as the documented report has them). The verdict is the
# Kubernetes device plugin's (ipufs/deviceplugin/health.py, from STATUS and
# ERROR_STATE), so the plugin, this check and the exporter never disagree.
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

from ipufs.abi.registers import STATUS_LINK_DOWN
from ipufs.client.status import Status
from ipufs.deviceplugin.health import Health, of_status
from ipufs.tools import devices


@dataclass(frozen=True, slots=True)
class IpuHealth:
    """One IPU's verdict and what it was made from."""

    ipu: int
    board_ipu_index: int
    status: Status
    health: Health

    @property
    def error(self) -> str:
        """The report's kind of failure: a link that is down is the
        device's connection; anything else is the device."""
        return "connection" if self.status.bits & STATUS_LINK_DOWN else "device"


def check(root: Path, index: int) -> IpuHealth:
    """Read IPU ``index``'s STATUS and ERROR_STATE (pread on ipuN, as a
    tool reads them) and judge them."""
    return judged(index, devices.registers(root, index))


def judged(index: int, registers: dict[str, int]) -> IpuHealth:
    """The verdict on IPU ``index`` from its config registers as
    devices.registers read them."""
    status = Status(registers["STATUS"], registers["ERROR_STATE"])
    return IpuHealth(index, registers["BOARD_IPU_INDEX"], status, of_status(status))


def report(verdicts: list[IpuHealth], partition: str) -> str:
    """The JSON report: "{}", or {"hosts": {HOST: [failing IPUs]}}, each
    in ``partition``."""
    failing = [{"error": v.error, "id": str(v.ipu), "partition": partition, "board ipu index": str(v.board_ipu_index),
                "reason": v.health.reason} for v in verdicts if not v.health.healthy]
    if not failing:
        return "{}"
    return json.dumps({"hosts": {socket.gethostname(): failing}}, indent=2)
