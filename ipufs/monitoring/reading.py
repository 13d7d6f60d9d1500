# One scrape's reading of the IPUs, typed: each IPU's config registers (one
# pread), the daemon's view of it (one `status` request for all IPUs), its
# gc-info attributes with their typed values (ipufs/tools/info.py: the ICU
# through one open of its nodes), the health verdict, what its exchange BAR
# and host exchange memory hold, and the pod it is allocated to. The metric
# table (metrics.py) takes every value from here, never from display text.
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipufs.abi.ipu_view import IpuView
from ipufs.deviceplugin.inventory import device_id
from ipufs.monitoring import health
from ipufs.tools import devices, info


@dataclass(frozen=True, slots=True)
class Pod:
    """Where the kubelet says an IPU is allocated (its pod-resources API)."""

    pod: str
    namespace: str
    container: str


NO_POD = Pod("", "", "")


@dataclass(frozen=True)
class Reading:
    """What one scrape read of one IPU."""

    index: int
    registers: dict[str, int]
    view: IpuView | None  # None: the daemon did not answer about it
    attributes: dict[str, info.Field]  # by gc-info key
    verdict: health.IpuHealth
    exchange: os.stat_result  # ipuN_ex: the tile memory windows
    pod: Pod = field(default=NO_POD)

    def value(self, key: str) -> Any:
        """The typed value of gc-info attribute ``key`` (None: N/A, or not
        shown, as the user keys while nobody is attached)."""
        found = self.attributes.get(key)
        return None if found is None else found.value

    @property
    def device(self) -> str:
        """The id the device plugin advertises for this IPU (and the
        kubelet reports it allocated under)."""
        return device_id(self.index)


def read(root: Path, index: int, view: IpuView | None, pod: Pod = NO_POD) -> Reading:
    """Read IPU ``index`` under ``root`` once (OSError when its nodes
    cannot be read); ``view``: the daemon's, from devices.daemon_views."""
    registers = devices.registers(root, index)
    attributes = {f.key: f for f in info.fields_from(root, index, registers, view)}
    exchange = os.stat(root / f"ipu{index}_ex")
    return Reading(index, registers, view, attributes, health.judged(index, registers), exchange, pod)
