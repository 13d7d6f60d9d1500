# What the control channel can do: the handlers, over the daemon's driver
# and model. Each takes the request object and returns the answer's fields.
from __future__ import annotations

import pwd
import threading
from collections.abc import Callable
from typing import Any

import trio

from ipufs import __version__
from ipufs.daemon.control.protocol import ControlError, Handler, encode
from ipufs.abi.interrupts import SIGNAL_NAMES
from ipufs.daemon import faults
from ipufs.driver import procs
from ipufs.daemon.faults import FaultError, FaultInjector
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.daemon.plan import FaultPlan
from ipufs.daemon.trace import KINDS, Filter, Tracer
from ipufs.abi.interrupts import Interrupt


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
    def __init__(self, filesystem: IpuFilesystem, requests: Callable[[], int] = lambda: 0) -> None:
        self.fs = filesystem
        self.requests = requests

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
        names = SIGNAL_NAMES
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
            "requests": self.requests(),
            "ipus": [self._ipu(i) for i in range(len(fs.devices.ipus))],
        }

    def ipu(self, request: dict[str, Any]) -> dict[str, Any]:
        """One IPU: {"op": "ipu", "ipu": N}."""
        return self._ipu(self._index(request))


class DeviceSide:
    """The control operations that act on the device: faults, fault plans
    and the live trace (docs/faults.md)."""

    def __init__(self, filesystem: IpuFilesystem, tracer: Tracer, injector: FaultInjector,
                 start_plan: Callable[[FaultPlan], None], *, lock: threading.RLock) -> None:
        self.fs = filesystem
        self.tracer = tracer
        self.lock = lock
        self.injector = injector
        self.start_plan = start_plan
        self.plan: FaultPlan | None = None

    def handlers(self) -> dict[str, Handler]:
        return {"inject": self.inject, "plan": self.load_plan, "plan-log": self.plan_log}

    def inject(self, request: dict[str, Any]) -> dict[str, Any]:
        """{"op": "inject", "kind": ..., "ipu": N, ...parameters}"""
        try:
            fault = faults.parse(request, len(self.fs.devices.ipus))
            self.injector.apply(fault)
        except FaultError as exc:
            raise ControlError(str(exc)) from None
        return {"fired": fault.describe()}

    def load_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        """{"op": "plan", "toml": TEXT}: replace the fault plan."""
        text = request.get("toml")
        if not isinstance(text, str):
            raise ControlError("plan takes toml: the plan's text")
        try:
            plan = FaultPlan.parse(text, len(self.fs.devices.ipus))
        except FaultError as exc:
            raise ControlError(str(exc)) from None
        self.plan = plan
        self.start_plan(plan)
        return {"faults": len(plan.entries), "seed": plan.seed}

    def plan_log(self, request: dict[str, Any]) -> dict[str, Any]:
        """What the plan has fired so far: [ipu, access number (-1: timed), fault]."""
        return {"log": [list(item) for item in self.plan.log] if self.plan else []}

    async def trace(self, request: dict[str, Any], stream: trio.SocketStream) -> None:
        """{"op": "trace", "ipu": N?, "kinds": [...]?}: the connection then
        carries one JSON event per line until the client closes it."""
        kinds = request.get("kinds") or []
        ipu = request.get("ipu")
        if not isinstance(kinds, list) or not set(kinds) <= set(KINDS) or not (ipu is None or isinstance(ipu, int)):
            await stream.send_all(encode({"ok": False, "error": f"kinds must be among {', '.join(KINDS)}"}))
            return
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
