# What the control channel can do: its operations, over the daemon's driver
# and model. Each declares its arguments (checked before it runs) and
# returns the answer's fields; docs/control.md lists them all.
from __future__ import annotations

import pwd
import threading
from collections.abc import Callable
from typing import Any

import trio

from ipufs import __version__
from ipufs.abi.interrupts import SIGNAL_NAMES, Interrupt
from ipufs.abi.ipu_view import AttachedProcess, IpuView
from ipufs.daemon import faults
from ipufs.daemon.control.peers import ControlRights, Peer
from ipufs.daemon.control.protocol import Operation, RequestRefused, encode
from ipufs.daemon.energy import EnergyMeter
from ipufs.daemon.faults import IPU, FaultError, FaultInjector, limits_of
from ipufs.daemon.fields import Integer, NameList, Text
from ipufs.daemon.plan import FaultPlan
from ipufs.daemon.plan_runner import PlanRunner
from ipufs.daemon.trace import KINDS, Filter, Tracer
from ipufs.daemon.utilisation import Utilisation
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IpuDriver
from ipufs.driver.pid_namespaces import PidView
from ipufs.driver.system import REAL, SystemCalls
from ipufs.model.power import FULL

#: The IPU a request is about, required.
THE_IPU = Integer("ipu", IPU.help, hi=IPU.hi, hi_text=IPU.hi_text)
#: The IPU a trace follows (absent: all).
SOME_IPU = Integer("ipu", "only this IPU", optional=True, hi=IPU.hi, hi_text=IPU.hi_text)
TRACE_KINDS = NameList("kinds", "only these kinds of event", default=[], names=KINDS)
PLAN_TEXT = Text("toml", "the plan's TOML text (empty: no faults)")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class StatusQueries:
    """The control operations that report: the daemon and its IPUs, as the
    driver and the model hold them; ``system`` reads facts about client
    processes; ``mode`` says how BARs are served; ``requests`` counts the
    requests served."""

    def __init__(self, devices: DeviceSet, driver: IpuDriver, utilisation: Utilisation, mode: Callable[[], str],
                 requests: Callable[[], int] = lambda: 0, system: SystemCalls = REAL) -> None:
        self.devices = devices
        self.driver = driver
        self.utilisation = utilisation
        self.mode = mode
        self.requests = requests
        self.system = system
        self.energy = EnergyMeter(utilisation)

    def operations(self) -> list[Operation]:
        return [Operation("status", (), self.status), Operation("ipu", (THE_IPU,), self.ipu)]

    def _ipu(self, index: int, peer: Peer) -> IpuView:
        driver, system = self.driver, self.system
        model = self.devices.ipus[index]
        att = driver.attachments.get(index)
        attached: AttachedProcess | None = None
        if att is not None:
            uid = system.uid_of(att.pid)
            where = system.pid_namespace(att.pid)
            # As the asker's PID namespace numbers it, as the kernel tells pids.
            seen = system.pid_seen_by(att.pid, peer.pid)
            attached = {"pid": seen, "command": system.command_of(att.pid), "uid": uid,
                        "user": _user(uid), "ipu_id": att.ipu_id, "buffers": len(att.buffers),
                        "buffer_bytes": sum(b.length for b in att.buffers.values()),
                        # Its pid in its own PID namespace.
                        "namespace": None if where is None else {"pid_ns": where[0], "pid": where[1]}}
            if seen is None:
                attached["pid_note"] = ("outside your PID namespace" if peer.pid else
                                        "unknown: you are outside the daemon's PID namespace")
        names = SIGNAL_NAMES
        board = model.icu.board
        session = driver.attachments.session(index)
        return {
            "ipu": index,
            "attached": attached,
            "signals_sent": {names[s]: driver.signals.sent[index][s] for s in Interrupt},
            "signals_dropped": {names[s]: driver.signals.dropped[index][s] for s in Interrupt},
            "interrupts_raised": {names[s]: model.interrupts.raised[s] for s in Interrupt},
            "reset_count": model.reset_count,
            "exception_count": model.exception_count,  # raised since the last clear or reset
            "parity_errors": len(model.tiles.bad_parity),  # tile memory words whose parity is bad now
            "use": model.utilisation / FULL,  # UTILISATION: tiles busy over the last second, 0..1
            "session_use": self.utilisation.session(index),  # the same over the current or last attachment
            "energy_j": self.energy.joules(index, board.board_type, board.clock_mhz),
            "link_errors": model.link_errors.total,
            "link_errors_session": None if session is None else model.link_errors.between(*session),
            "exception": None if model.exception is None else {
                "cause": model.exception.cause, "tile": model.exception.tile,
                "address": model.exception.address, "context": model.exception.context},
            "telemetry": {"temperature_mc": board.temperature_mc, "power_mw": board.power_mw,
                          "clock_mhz": board.clock_mhz},
        }

    def status(self, request: dict[str, Any], peer: Peer) -> dict[str, Any]:
        """The daemon and every IPU."""
        return {
            "version": __version__,
            "profile": self.devices.profile.name,
            "mode": self.mode(),
            "requests": self.requests(),
            "ipus": [self._ipu(i, peer) for i in range(len(self.devices.ipus))],
        }

    def ipu(self, request: dict[str, Any], peer: Peer) -> dict[str, Any]:
        """One IPU: {"op": "ipu", "ipu": N}."""
        return dict(self._ipu(request["ipu"], peer))


class DeviceSide:
    """The control operations that act on the device: faults, fault plans
    and the live trace (docs/faults.md). Those that change it check who
    asks with ``rights``."""

    def __init__(self, devices: DeviceSet, tracer: Tracer, injector: FaultInjector, plans: PlanRunner, *,
                 rights: ControlRights, lock: threading.RLock, system: SystemCalls = REAL) -> None:
        self.devices = devices
        self.system = system
        self.tracer = tracer
        self.lock = lock
        self.injector = injector
        self.plans = plans
        self.rights = rights

    def operations(self) -> list[Operation]:
        return [Operation("inject", (), self.inject, open_ended=True),
                Operation("plan", (PLAN_TEXT,), self.load_plan),
                Operation("plan-log", (), self.plan_log),
                Operation("trace", (SOME_IPU, TRACE_KINDS), stream=self.trace)]

    def inject(self, request: dict[str, Any], peer: Peer) -> dict[str, Any]:
        """{"op": "inject", "kind": ..., "ipu": N, ...the kind's fields}"""
        try:
            fault = faults.parse(request, limits_of(self.devices))
        except FaultError as exc:
            raise RequestRefused(str(exc)) from None
        self.rights.check(peer, "inject faults", [fault.ipu])
        self.injector.apply(fault)
        return {"fired": fault.describe()}

    def load_plan(self, request: dict[str, Any], peer: Peer) -> dict[str, Any]:
        """{"op": "plan", "toml": TEXT}: replace the fault plan (an empty
        text clears it)."""
        try:
            plan = FaultPlan.parse(request["toml"], limits_of(self.devices))
        except FaultError as exc:
            raise RequestRefused(str(exc)) from None
        self.rights.check(peer, "load fault plans", [entry.fault.ipu for entry in plan.entries])
        self.plans.start(plan)
        return {"faults": len(plan.entries), "seed": plan.seed}

    def plan_log(self, request: dict[str, Any], peer: Peer) -> dict[str, Any]:
        """What the plan has fired so far: [ipu, access number (-1: timed), fault]."""
        plan = self.plans.plan
        return {"log": [list(item) for item in plan.log] if plan else []}

    async def trace(self, request: dict[str, Any], stream: trio.SocketStream, peer: Peer) -> None:
        """{"op": "trace", "ipu": N?, "kinds": [...]?}: the connection then
        carries one JSON event per line until the client closes it (or
        stops reading it: the stream then fails as if it had). Events the
        client fell too far behind to be kept are counted, and a
        ``dropped`` event says how many before the next one. Pids are as
        ``peer`` sees them (null: outside its PID namespace). The arguments
        are checked before it runs."""
        kinds, ipu = request["kinds"], request["ipu"]
        pids = PidView(peer.pid, self.system.pid_seen_by)
        with self.lock:
            sub, events = self.tracer.subscribe(Filter(ipu, frozenset(kinds)))
        gone = (trio.BrokenResourceError, trio.ClosedResourceError)
        try:
            await stream.send_all(encode({"ok": True, "tracing": True}))
            async with trio.open_nursery() as nursery:

                async def watch_close() -> None:
                    try:
                        while await stream.receive_some(1024):
                            pass
                    except gone:
                        pass
                    nursery.cancel_scope.cancel()

                async def forward() -> None:
                    try:
                        async for event in events:
                            if sub.dropped:  # the client fell behind: say how far
                                await stream.send_all(encode(self.tracer.dropped_notice(sub)))
                            if not pids.same and "pid" in event:
                                event = {**event, "pid": pids(event["pid"])}
                            await stream.send_all(encode(event))
                    except gone:
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch_close)
                nursery.start_soon(forward)
        except gone:
            pass  # the client left before the first line
        finally:
            with self.lock:
                self.tracer.unsubscribe(sub)
            await events.aclose()
