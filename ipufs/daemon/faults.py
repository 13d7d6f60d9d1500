# The device side's faults, for test authors: one table of fault kinds with
# their parameters, applied to the model through its fault API. Used by the
# control channel (`ipufs inject`) and by fault plans (docs/faults.md).
from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ipufs.driver.filesystem import IpuFilesystem
from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import REGISTERS, ExceptionCause
from ipufs.model.sync import HOST_ZONES, Zone, interrupt_for


class FaultError(ValueError):
    """A fault that cannot be made: an unknown kind, a missing or bad
    parameter. The message says which."""


class Kind(enum.Enum):
    EXCEPTION = "exception"  # cause, tile, address, context
    PARITY = "parity"  # tile, address
    ICU_MESSAGE = "icu-message"  # words: five u32
    SYNC = "sync"  # zone (name or number), action: complete | arrive
    ICU_TIMEOUT = "icu-timeout"  # for: seconds (0: until icu-recover)
    ICU_RECOVER = "icu-recover"
    LINK_DOWN = "link-down"
    LINK_UP = "link-up"
    TELEMETRY = "telemetry"  # temperature_mc, power_mw, clock_mhz
    RESET = "reset"
    INTERRUPT = "interrupt"  # source: name or bit number; stamp: bool


ZONE_NAMES = {"gs1": Zone.GS1, "gs1h": Zone.GS1H, "gs2": Zone.GS2, "gs2h": Zone.GS2H,
              "gs1-master": Zone.GS1_MSR, "gs1h-master": Zone.GS1H_MSR,
              "gs2-master": Zone.GS2_MSR, "gs2h-master": Zone.GS2H_MSR}


@dataclass(frozen=True)
class Fault:
    kind: Kind
    ipu: int
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.kind.value} ipu={self.ipu}" + (f" {args}" if args else "")


def _int(params: dict[str, Any], name: str, default: int | None = None) -> int:
    value = params.get(name, default)
    if value is None:
        raise FaultError(f"missing {name}")
    if isinstance(value, str):
        value = int(value, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FaultError(f"{name} must be an integer")
    return value


def parse(request: dict[str, Any], ipus: int) -> Fault:
    """A Fault from a request or plan entry: {"kind": ..., "ipu": N, ...}."""
    try:
        kind = Kind(request.get("kind"))
    except ValueError:
        raise FaultError(f"unknown fault kind {request.get('kind')!r}; known: "
                         f"{', '.join(k.value for k in Kind)}") from None
    ipu = _int(request, "ipu", 0)
    if not 0 <= ipu < ipus:
        raise FaultError(f"ipu must be 0..{ipus - 1}")
    skip = {"kind", "ipu", "op", "after", "every", "at", "probability", "times"}
    params = {k: v for k, v in request.items() if k not in skip}
    fault = Fault(kind, ipu, params)
    check(fault)
    return fault


def _cause(value: Any) -> ExceptionCause:
    try:
        return ExceptionCause[value.upper()] if isinstance(value, str) else ExceptionCause(value)
    except (KeyError, ValueError):
        raise FaultError(f"unknown cause {value!r}; known: {', '.join(c.name.lower() for c in ExceptionCause)}") from None


def _zone(value: Any) -> int:
    zone = ZONE_NAMES.get(value.lower()) if isinstance(value, str) else value
    if zone not in HOST_ZONES:
        raise FaultError(f"zone must be one of {', '.join(ZONE_NAMES)} or 4..7, 12..15")
    return int(zone)


def _source(value: Any) -> Interrupt:
    try:
        return Interrupt[value.upper().replace("-", "_")] if isinstance(value, str) else Interrupt(value)
    except (KeyError, ValueError):
        raise FaultError(f"unknown source {value!r}; known: {', '.join(s.name.lower() for s in Interrupt)}") from None


def check(fault: Fault) -> None:
    """Raise FaultError when the fault's parameters are wrong."""
    p = fault.params
    if fault.kind is Kind.EXCEPTION:
        _cause(p.get("cause", "injected"))
    elif fault.kind is Kind.PARITY:
        _int(p, "tile"), _int(p, "address")
    elif fault.kind is Kind.ICU_MESSAGE:
        words = p.get("words")
        if not (isinstance(words, list) and len(words) == 5 and all(isinstance(w, int) and 0 <= w < 1 << 32
                                                                    for w in words)):
            raise FaultError("words must be five u32")
    elif fault.kind is Kind.SYNC:
        _zone(p.get("zone", "gs1"))
        if p.get("action", "complete") not in ("complete", "arrive"):
            raise FaultError("action must be complete or arrive")
    elif fault.kind is Kind.ICU_TIMEOUT:
        if not isinstance(p.get("for", 0), (int, float)) or p.get("for", 0) < 0:
            raise FaultError("for must be seconds, 0 or more")
    elif fault.kind is Kind.TELEMETRY:
        if not set(p) <= {"temperature_mc", "power_mw", "clock_mhz"} or not p:
            raise FaultError("telemetry takes temperature_mc, power_mw and/or clock_mhz")
        for name in p:
            _int(p, name)
    elif fault.kind is Kind.INTERRUPT:
        _source(p.get("source"))


class FaultInjector:
    """Applies faults to the model, in the daemon's loop. ``later(seconds,
    action)`` schedules an action (the end of an ICU timeout)."""

    def __init__(self, filesystem: IpuFilesystem, later: Callable[[float, Callable[[], None]], None]) -> None:
        self.fs = filesystem
        self.later = later
        self.fired: list[str] = []
        self.on_fire: Callable[[Fault], None] | None = None

    def apply(self, fault: Fault) -> None:
        check(fault)
        model = self.fs.devices.ipus[fault.ipu]
        p = fault.params
        kind = fault.kind
        if kind is Kind.EXCEPTION:
            model.raise_exception(_cause(p.get("cause", "injected")), _int(p, "tile", 0), _int(p, "address", 0),
                                  _int(p, "context", 0))
        elif kind is Kind.PARITY:
            model.tiles.mark_bad_parity(_int(p, "tile"), _int(p, "address"))
        elif kind is Kind.ICU_MESSAGE:
            model.post_icu_message(tuple(p["words"]))
        elif kind is Kind.SYNC:
            zone = _zone(p.get("zone", "gs1"))
            if p.get("action", "complete") == "arrive":
                model.request_sync(zone)
            else:
                model.raise_interrupt(interrupt_for(zone))
        elif kind is Kind.ICU_TIMEOUT:
            model.set_icu_responsive(False)
            seconds = float(p.get("for", 0))
            if seconds:
                self.later(seconds, lambda: self._recover(fault.ipu))
        elif kind is Kind.ICU_RECOVER:
            model.set_icu_responsive(True)
        elif kind is Kind.LINK_DOWN:
            model.set_link(False)
        elif kind is Kind.LINK_UP:
            model.set_link(True)
        elif kind is Kind.TELEMETRY:
            model.set_telemetry(**{k: _int(p, k) for k in p})
        elif kind is Kind.RESET:
            model.reset()
        elif kind is Kind.INTERRUPT:
            source = _source(p.get("source"))
            if p.get("stamp"):
                # For latency measurements: the moment of the event, as the
                # low 32 bits of CLOCK_MONOTONIC in ns, in SCRATCH.
                model.config.store_word(REGISTERS["SCRATCH"].index, time.monotonic_ns() & 0xFFFFFFFF)
            model.raise_interrupt(source)
        self.fs.settle(fault.ipu)  # signals first, bookkeeping after
        self.fired.append(fault.describe())
        if self.on_fire is not None:
            self.on_fire(fault)

    def _recover(self, ipu: int) -> None:
        self.fs.devices.ipus[ipu].set_icu_responsive(True)
        self.fs.settle(ipu)
