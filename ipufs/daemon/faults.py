# The device side's faults, for test authors: a fault is a kind of the table
# in fault_kinds.py, an IPU and the kind's checked fields; the injector
# applies it to the model in the daemon's loop. Used by the control channel
# (`ipufs inject`) and by fault plans (docs/faults.md).
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipufs.daemon.fault_kinds import KINDS, FaultKind, Later
from ipufs.daemon.fields import Integer, Invalid, Limits, check_all, shown
from ipufs.driver.devices import DeviceSet
from ipufs.driver.work import DeviceWork


class FaultError(ValueError):
    """A fault that cannot be made: an unknown kind, a missing or bad
    parameter. The message says which."""


def _last_ipu(limits: Limits) -> int:
    return limits.ipus - 1


#: The IPU of a fault, a control request or a trace.
IPU = Integer("ipu", "the IPU", default=0, option="-d", hi=_last_ipu, hi_text="IPUS-1")


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    ipu: int
    params: dict[str, Any] = field(default_factory=dict)  # checked, defaults filled in

    def describe(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()) if v is not None)
        return f"{self.kind.name} ipu={self.ipu}" + (f" {args}" if args else "")


def limits_of(devices: DeviceSet) -> Limits:
    return Limits.of(devices.profile, len(devices.ipus))


def parse(request: Mapping[str, Any], limits: Limits, *, ignore: frozenset[str] = frozenset()) -> Fault:
    """A Fault from a request or plan entry: {"kind": ..., "ipu": N, ...the
    kind's fields}; names in ``ignore`` belong to the caller (op, triggers).
    Raises FaultError naming the field that is wrong."""
    name = request.get("kind")
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise FaultError(f"unknown fault kind {shown(name)}; known: {', '.join(KINDS)}")
    given = {k: v for k, v in request.items() if k not in ignore and k not in ("kind", "ipu")}
    try:
        ipu = IPU.check(request.get("ipu", 0), limits)
        params = check_all(kind.fields, given, limits, what=kind.name, also=tuple(sorted(ignore - {"op"})))
    except Invalid as exc:
        raise FaultError(str(exc)) from None
    if kind.one_or_more and all(v is None for v in params.values()):
        raise FaultError(f"{kind.name} takes one or more of {', '.join(f.name for f in kind.fields)}")
    return Fault(kind, ipu, params)


class FaultInjector:
    """Applies faults to the model of ``devices``, each a unit of ``work``
    (signals first, bookkeeping after). ``later(seconds, action)``
    schedules an action (the end of an ICU timeout); ``on_fire`` hears of
    every fault applied (the trace)."""

    def __init__(self, devices: DeviceSet, work: DeviceWork, later: Later, *,
                 on_fire: Callable[[Fault], None]) -> None:
        self.devices = devices
        self.work = work
        self.later = later
        self.on_fire = on_fire

    def apply(self, fault: Fault) -> None:
        model = self.devices.ipus[fault.ipu]
        self.work.act(fault.ipu, lambda: fault.kind.action(model, fault.params, self._later(fault.ipu)))
        self.on_fire(fault)

    def _later(self, ipu: int) -> Later:
        def later(seconds: float, action: Callable[[], None]) -> None:
            if not math.isfinite(seconds) or seconds < 0:  # checked at the edge; never a timer of NaN
                raise FaultError(f"not a delay: {seconds!r}")

            self.later(seconds, lambda: self.work.act(ipu, action))

        return later
