# What the control channel can do: the handlers, over the daemon's driver
# and model. Each takes the request object and returns the answer's fields.
from __future__ import annotations

import pwd
from typing import Any

from ipufs import __version__
from ipufs.control.protocol import ControlError, Handler
from ipufs.driver import abi, procs
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.model.interrupts import Interrupt


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _owner_uid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return -1


class Operations:
    def __init__(self, filesystem: IpuFilesystem) -> None:
        self.fs = filesystem

    def handlers(self) -> dict[str, Handler]:
        return {"status": self.status, "ipu": self.ipu}

    def _index(self, request: dict[str, Any]) -> int:
        index = request.get("ipu")
        if not isinstance(index, int) or not 0 <= index < len(self.fs.devices.ipus):
            raise ControlError(f"ipu must be 0..{len(self.fs.devices.ipus) - 1}")
        return index

    def _ipu(self, index: int) -> dict[str, Any]:
        driver = self.fs.driver
        model = self.fs.devices.ipus[index]
        att = driver.attachments.get(index)
        attached = None
        if att is not None:
            uid = _owner_uid(att.pid)
            attached = {"pid": att.pid, "command": procs.command_of(att.pid), "uid": uid,
                        "user": _user(uid), "ipu_id": att.ipu_id, "buffers": len(att.buffers)}
        names = abi.SIGNAL_NAMES
        board = model.icu.board
        return {
            "ipu": index,
            "attached": attached,
            "signals_sent": {names[s]: driver.signals_sent[index][s] for s in Interrupt},
            "signals_dropped": {names[s]: driver.signals_dropped[index][s] for s in Interrupt},
            "interrupts_raised": {names[s]: model.interrupts.raised[s] for s in Interrupt},
            "reset_count": model.reset_count,
            "exception": None if model.exception is None else {
                "cause": model.exception.cause, "tile": model.exception.tile,
                "address": model.exception.address, "context": model.exception.context},
            "telemetry": {"temperature_mc": board.temperature_mc, "power_mw": board.power_mw,
                          "clock_mhz": board.clock_mhz},
        }

    def status(self, request: dict[str, Any]) -> dict[str, Any]:
        """The daemon and every IPU."""
        fs = self.fs
        return {
            "version": __version__,
            "profile": fs.devices.profile.name,
            "mode": fs.mode,
            "ipus": [self._ipu(i) for i in range(len(fs.devices.ipus))],
        }

    def ipu(self, request: dict[str, Any]) -> dict[str, Any]:
        """One IPU: {"op": "ipu", "ipu": N}."""
        return self._ipu(self._index(request))
