# A gcipuinfo-compatible Python API over an ipufs mount (docs/monitoring.md).
# It follows the documented shape of Graphcore's IPU Info library: a
# `gcipuinfo` class built with a discovery mode, that reads every attribute
# of every IPU when built and again on updateData() (or on every query after
# setUpdateMode(True)); getDevices() and getNamedAttributeFor*() answer
# strings as gc-info prints them; checkHealthOfDevices() a JSON report; and
# getLastAppEventRecord*() the application event record. The values are
# those of `ipufs info`, read the same way (ipufs/tools/info.py).
from __future__ import annotations

import json
import os
from pathlib import Path

from ipufs.monitoring import health
from ipufs.monitoring.labels import LABELS, NA
from ipufs.tools import devices, info
from ipufs.problems import Problem

__all__ = ["gcipuinfo", "DiscoverActivePartitionIPUs", "DiscoverAllPartitionIPUs", "NA",
           "EVENT_RECORD_ENV", *LABELS]

#: The discovery modes (enum DeviceDiscoveryMode). An ipufs mount is one
#: partition, so both find the same IPUs.
DiscoverActivePartitionIPUs = 0
DiscoverAllPartitionIPUs = 1
#: Where applications store their event record (gcipuinfo, "Event record
#: storage"), when the caller names no path.
EVENT_RECORD_ENV = "IPU_APP_EVENT_RECORD_PATH"
#: Where the IPUs' nodes are, when set; else as `ipufs info` finds them.
DEV_ENV = "IPUFS_DEV"

globals().update(LABELS)  # IpuPower = "ipu power", BoardType = "board type", ...


def _root() -> Path:
    named = os.environ.get(DEV_ENV)
    return Path(named) if named else devices.default_root()


class gcipuinfo:  # noqa: N801 (the documented class name)
    """The IPUs of an ipufs mount, as gcipuinfo describes devices."""

    def __init__(self, discoveryMode: int = DiscoverActivePartitionIPUs) -> None:  # noqa: N803
        if discoveryMode not in (DiscoverActivePartitionIPUs, DiscoverAllPartitionIPUs):
            raise ValueError(f"unknown discovery mode {discoveryMode!r}: use DiscoverActivePartitionIPUs "
                             "or DiscoverAllPartitionIPUs")
        self.discoveryMode = discoveryMode
        self.root = _root()
        self._auto = False
        self._devices: list[dict[str, str]] = []
        self.updateData()

    # --- device attribute queries ---------------------------------------------------
    def updateData(self) -> bool:  # noqa: N802
        """Read every attribute of every IPU again. False when a device
        could not be read (the previous data is kept)."""
        try:
            indices = devices.indices(self.root)
        except Problem:
            self._devices = []  # no IPUs there: nothing to describe
            return True
        try:
            self._devices = [{f.key: f.text for f in info.fields(self.root, i)} for i in indices]
        except OSError:
            return False
        return True

    def setUpdateMode(self, autoUpdate: bool) -> None:  # noqa: N802, N803
        """True: read the devices again on every query; False (the
        default): answer from the last read."""
        self._auto = bool(autoUpdate)

    def _current(self) -> list[dict[str, str]]:
        if self._auto:
            self.updateData()
        return self._devices

    def getDevices(self) -> list[dict[str, str]]:  # noqa: N802
        """Every IPU's attributes, label -> value as gc-info prints it."""
        return [dict(d) for d in self._current()]

    def getNamedAttributeForAll(self, attributeName: str) -> list[str]:  # noqa: N802, N803
        """One attribute of every IPU, in device order ("N/A" where it has
        no meaning). ValueError for a label gcipuinfo does not define."""
        label = _known(attributeName)
        return [d.get(label, NA) for d in self._current()]

    def getNamedAttributeForDevice(self, deviceId: int, attributeName: str) -> str:  # noqa: N802, N803
        """One attribute of one IPU. IndexError for a device id no IPU
        has, ValueError for a label gcipuinfo does not define."""
        label = _known(attributeName)
        found = self._current()
        for d in found:
            if d.get("id") == str(deviceId):
                return d.get(label, NA)
        valid = f"valid ids are 0-{len(found) - 1}" if found else "no IPUs were found"
        raise IndexError(f"device id {deviceId} does not exist ({valid})")

    # --- device health check --------------------------------------------------------
    def checkHealthOfDevices(self) -> str:  # noqa: N802
        """"{}" when every IPU is fit, else a JSON report of the failing
        ones; the error's description when the check cannot run."""
        try:
            return health.report([health.check(self.root, i) for i in devices.indices(self.root)])
        except (OSError, Problem) as exc:
            return f"health check failed: {exc}"

    # --- application event record --------------------------------------------------
    def getLastAppEventRecord(self, eventRecordPath: str = "") -> dict[str, str]:  # noqa: N802, N803
        """The last event an application stored under ``eventRecordPath``
        (default: $IPU_APP_EVENT_RECORD_PATH), key -> value; {} when none."""
        record = _last_record(eventRecordPath or os.environ.get(EVENT_RECORD_ENV, ""))
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in record.items()}

    def getLastAppEventRecordAsJSON(self, eventRecordPath: str = "") -> str:  # noqa: N802, N803
        """The same record as a JSON object ("{}" when none)."""
        return json.dumps(_last_record(eventRecordPath or os.environ.get(EVENT_RECORD_ENV, "")))


def _known(label: str) -> str:
    if label not in LABELS.values():
        raise ValueError(f"unknown attribute label {label!r} (docs/monitoring.md lists them)")
    return label


def _last_record(directory: str) -> dict[str, object]:
    """The newest JSON object stored in ``directory`` (with its path under
    "event record path"); {} when there is none or it is unreadable."""
    if not directory:
        return {}
    try:
        candidates = [e for e in os.scandir(directory) if e.name.endswith(".json") and e.is_file()]
    except OSError:
        return {}
    for entry in sorted(candidates, key=lambda e: e.stat().st_mtime_ns, reverse=True):
        try:
            with open(entry.path, encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            return {"event record path": entry.path, **record}
    return {}
