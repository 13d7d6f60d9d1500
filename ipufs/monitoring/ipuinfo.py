# A gcipuinfo-compatible Python API over an ipufs mount (docs/monitoring.md).
# It follows the documented shape of Graphcore's IPU Info library: a
# `gcipuinfo` class built with a discovery mode, that reads every attribute
# of every IPU when built and again on updateData() (or on every query after
# setUpdateMode(True)); getDevices() and getNamedAttributeFor*() answer
# strings as gc-info prints them; checkHealthOfDevices() a JSON report; and
# getLastAppEventRecord*() the application event record. The values are
# those of `ipufs info`, read the same way (ipufs/tools/info.py). The daemon
# is asked first, with a timeout: a daemon that is gone or stopped makes
# updateData() answer False (and the health check say why) instead of
# raising, or waiting in the kernel on its nodes.
from __future__ import annotations

import enum
import json
import os
from pathlib import Path

from ipufs.abi.ipu_view import IpuView
from ipufs.client import ControlError
from ipufs.monitoring import health, reach
from ipufs.monitoring.labels import LABELS, NA
from ipufs.tools import devices, info
from ipufs.problems import Problem

#: The keys of an application event record (gcipuinfo's "Application
#: Event Record key names"), with the values Graphcore's reference gives.
RECORD_KEYS = {
    "keyRecordPath": "event record path", "keyTimestamp": "timestamp", "keySeverity": "severity",
    "keyCommandLine": "command line", "keyPid": "pid", "keyAttachedIPUs": "attached ipus",
    "keySpecificIPUs": "specific ipus", "keyAttachedIPUHosts": "attached ipu hosts",
    "keySpecificIPUHosts": "specific ipu hosts", "keyPartition": "partition", "keyDescription": "description",
}
globals().update(RECORD_KEYS)

__all__ = ["gcipuinfo", "DiscoverActivePartitionIPUs", "DiscoverAllPartitionIPUs", "NA", "EventSeverity",
           "EVENT_RECORD_ENV", *LABELS, *RECORD_KEYS]


class EventSeverity(enum.IntEnum):
    """An event record's severity (its `severity` key). Graphcore's
    reference names the enum, and says a record is only replaced by one of
    equal or higher severity; its members here are ipufs's, in that order
    (docs/monitoring.md)."""

    Info = 0
    Warning = 1
    Error = 2
    Fatal = 3

#: The discovery modes (enum DeviceDiscoveryMode). An ipufs mount is one
#: partition, so both find the same IPUs.
DiscoverActivePartitionIPUs = 0
DiscoverAllPartitionIPUs = 1
#: Where applications store their event record (gcipuinfo, "Event record
#: storage"), when the caller names no path.
EVENT_RECORD_ENV = "IPU_APP_EVENT_RECORD_PATH"
#: Where the IPUs' nodes are, when set; else as `ipufs info` finds them.
DEV_ENV = "IPUFS_DEV"
#: The partition an application uses (Poplar's V-IPU variable), when set.
PARTITION_ENV = "IPUOF_VIPU_API_PARTITION_ID"

globals().update(LABELS)  # IpuPower = "ipu power", BoardType = "board type", ...


def _root() -> Path:
    named = os.environ.get(DEV_ENV)
    return Path(named) if named else devices.default_root()


class gcipuinfo:  # noqa: N801 (the documented class name)
    """The IPUs of an ipufs mount, as gcipuinfo describes devices."""

    keyRecordPath = RECORD_KEYS["keyRecordPath"]
    keyTimestamp = RECORD_KEYS["keyTimestamp"]
    keySeverity = RECORD_KEYS["keySeverity"]
    keyCommandLine = RECORD_KEYS["keyCommandLine"]
    keyPid = RECORD_KEYS["keyPid"]
    keyAttachedIPUs = RECORD_KEYS["keyAttachedIPUs"]
    keySpecificIPUs = RECORD_KEYS["keySpecificIPUs"]
    keyAttachedIPUHosts = RECORD_KEYS["keyAttachedIPUHosts"]
    keySpecificIPUHosts = RECORD_KEYS["keySpecificIPUHosts"]
    keyPartition = RECORD_KEYS["keyPartition"]
    keyDescription = RECORD_KEYS["keyDescription"]

    def __init__(self, discoveryMode: int = DiscoverActivePartitionIPUs) -> None:  # noqa: N803
        if discoveryMode not in (DiscoverActivePartitionIPUs, DiscoverAllPartitionIPUs):
            raise ValueError(f"unknown discovery mode {discoveryMode!r}: use DiscoverActivePartitionIPUs "
                             "or DiscoverAllPartitionIPUs")
        self.discoveryMode = discoveryMode
        self.root = _root()
        self._auto = False
        self._devices: list[dict[str, str]] = []
        #: why the last updateData() answered False (None: it did not)
        self.lastError: str | None = None
        self.updateData()

    # --- device attribute queries ---------------------------------------------------
    def updateData(self) -> bool:  # noqa: N802
        """Read every attribute of every IPU again. False when they could
        not be read: the daemon is gone or does not answer, or a device
        failed (the previous data is kept; ``lastError`` says why)."""
        try:
            views = _views(self.root)  # first: a stopped daemon's mount is never asked
            indices = devices.indices(self.root)
        except Problem:
            self._devices = []  # no IPUs there: nothing to describe
            return True
        except (OSError, ControlError) as exc:  # ENOTCONN, ECONNREFUSED: gone; ControlTimeout: stopped
            self.lastError = _why(exc)
            return False
        try:
            self._devices = [{f.key: f.text for f in info.fields_from(self.root, i, devices.registers(self.root, i),
                                                                      views.get(i))} for i in indices]
        except (OSError, ControlError) as exc:
            self.lastError = _why(exc)
            return False
        self.lastError = None
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
            _views(self.root)  # a daemon that is gone or stopped: say so rather than wait on its mount
            indices = devices.indices(self.root)
            return health.report([health.check(self.root, i) for i in indices], partition(self.root))
        except (OSError, Problem, ControlError) as exc:
            return f"health check failed: {_why(exc)}"

    # --- application event record --------------------------------------------------
    def getLastAppEventRecord(self, eventRecordPath: str = "") -> dict[str, str]:  # noqa: N802, N803
        """The last event an application stored under ``eventRecordPath``
        (default: $IPU_APP_EVENT_RECORD_PATH), key -> value; {} when none."""
        record = _last_record(eventRecordPath or os.environ.get(EVENT_RECORD_ENV, ""))
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in record.items()}

    def getLastAppEventRecordAsJSON(self, eventRecordPath: str = "") -> str:  # noqa: N802, N803
        """The same record as a JSON object ("{}" when none)."""
        return json.dumps(_last_record(eventRecordPath or os.environ.get(EVENT_RECORD_ENV, "")))


def _views(root: Path) -> dict[int, IpuView]:
    """The daemon's view of every IPU, within Control's timeout (raises
    OSError when the mount's daemon is gone, ControlError when it refuses
    or does not answer)."""
    return reach.views(root)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({exc.filename or 'the control socket'}): the daemon is gone"
    return str(exc)


def partition(root: Path) -> str:
    """The partition the IPUs under ``root`` form: the one Poplar names in
    $IPUOF_VIPU_API_PARTITION_ID when set, else the mount (one mount is
    one partition) by its path."""
    return os.environ.get(PARTITION_ENV) or devices.mountpoint_of(root, devices.indices(root)[0])


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
            return {RECORD_KEYS["keyRecordPath"]: entry.path, **record}
    return {}
