# The ipufs daemon: builds the devices, the filesystem and the FUSE server
# for one mount, clears a dead mount a crashed daemon left behind, and runs
# until cancelled. Model-side actions run in its trio loop through call().
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import trio

from ipufs.control.operations import DeviceSide, Operations
from ipufs.control.server import ControlServer
from ipufs.driver.devices import DeviceSet
from ipufs.driver.devlinks import DevLinks
from ipufs.driver.doorbells import RegisterWatcher
from ipufs.driver.faults import Fault, FaultInjector
from ipufs.driver.plan import FaultPlan
from ipufs.driver.driver import IpuDriver
from ipufs.driver.filesystem import IpuFilesystem, Ownership
from ipufs.driver.watch import PidfdWatcher
from ipufs.fuse import mount as fmount
from ipufs.fuse.operations import Negotiated
from ipufs.fuse.server import SPIN, FuseServer
from ipufs.model.profile import DEFAULT_PROFILE, PROFILES, Profile

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_MOUNTPOINT = "/run/ipufs"
MAX_IPUS = 4096


@dataclass
class DaemonConfig:
    mountpoint: str = DEFAULT_MOUNTPOINT
    ipus: int = 4
    profile: str = DEFAULT_PROFILE
    ownership: Ownership = field(default_factory=Ownership)
    passthrough: bool = True
    state_dir: Path | None = None
    group_size: int | None = None  # IPUs per GS2 group (default: per board)
    control: str | None = None  # control socket path (default: MOUNTPOINT.ctl)
    link_dev: bool = False  # link DEV_DIR/ipuN* to the nodes (the CLI's default as root)
    dev_dir: str = "/dev"
    fault_plan: str | None = None  # a TOML fault plan to start with
    trace_file: str | None = None  # write the trace here (JSON lines)
    trace_max_bytes: int = 64 << 20  # then rotate to TRACE_FILE.1
    spin_us: int = round(SPIN * 1e6)  # the reader's wait for a next request before it sleeps

    @property
    def control_path(self) -> str:
        return self.control or self.mountpoint.rstrip("/") + ".ctl"

    def validate(self) -> Profile:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r} (known: {', '.join(PROFILES)})")
        if not 0 < self.ipus <= MAX_IPUS:
            raise ValueError(f"--ipus must be between 1 and {MAX_IPUS}")
        if not 0 <= self.ownership.mode <= 0o1777:
            raise ValueError("--mode must be permission bits, such as 0660")
        if not 0 <= self.spin_us <= 10_000:
            raise ValueError("--spin-us must be between 0 and 10000")
        return PROFILES[self.profile]


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        profile = config.validate()
        self.config = config
        if config.state_dir is not None:
            config.state_dir.mkdir(parents=True, exist_ok=True)
        #: Held by the FUSE reader thread while it handles a request, and by
        #: every trio task that touches the devices, the driver or the model.
        self.lock = threading.RLock()
        self.devices = DeviceSet(profile, config.ipus, state_dir=config.state_dir,
                                 group_size=config.group_size)
        self.driver = IpuDriver(self.devices)
        self.filesystem = IpuFilesystem(
            self.devices, driver=self.driver, ownership=config.ownership,
            passthrough=config.passthrough,
        )
        self.registers = RegisterWatcher(self.filesystem, lock=self.lock)
        self.server = FuseServer(
            self.filesystem,
            config.mountpoint,
            passthrough=config.passthrough,
            source=f"ipufs:{profile.name}x{config.ipus}",
            lock=self.lock,
            spin=config.spin_us / 1e6,
            watcher=self.registers,
        )
        self.filesystem.attach_kernel(self.server)
        self.links = DevLinks(config.dev_dir, config.mountpoint, self.filesystem.tree) if config.link_dev else None
        self.filesystem.control_path = config.control_path
        self.injector = FaultInjector(self.filesystem, self._later)
        self.injector.on_fire = self._traced_fault
        self.device_side = DeviceSide(self.filesystem, self.injector, self._start_plan, self.lock)
        self.plan: FaultPlan | None = None
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._pending: list[tuple[float, Callable[[], None]]] = []
        if config.fault_plan:
            with open(config.fault_plan) as f:
                self.plan = FaultPlan.parse(f.read(), config.ipus)
            self.device_side.plan = self.plan
        if config.trace_file:
            self.filesystem.tracer.open_file(config.trace_file, config.trace_max_bytes)
        for ipu in self.devices.ipus:
            ipu.icu.observer = self._icu_observer(ipu.index)
        o = config.ownership
        status = Operations(self.filesystem, lambda: self.server.session.requests)
        handlers = status.handlers() | self.device_side.handlers()
        self.control = ControlServer(
            config.control_path,
            {op: self._locked(handler) for op, handler in handlers.items()},
            uid=o.uid, gid=o.gid, mode=o.mode & 0o777,
            streams={"trace": self.device_side.trace},
        )

    def _icu_observer(self, index: int) -> Callable[[tuple[int, ...], tuple[int, ...] | None], None]:
        tracer = self.filesystem.tracer

        def observe(request: tuple[int, ...], answer: tuple[int, ...] | None) -> None:
            if tracer.enabled:
                from ipufs.model.icu import Op

                op = (request[0] >> 16) & 0xFFF
                tracer.emit("icu", index, op=Op(op).name if op in Op.__members__.values() else op,
                            request=[hex(w) for w in request],
                            answer=None if answer is None else [hex(w) for w in answer])

        return observe

    def _locked(self, handler: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def run(request: dict[str, Any]) -> dict[str, Any]:
            with self.lock:
                return handler(request)

        return run

    def _traced_fault(self, fault: Fault) -> None:
        if self.filesystem.tracer.enabled:
            self.filesystem.tracer.emit("fault", fault.ipu, fault=fault.describe())

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` in the loop after ``seconds`` (an ICU timeout's end)."""
        nursery, token = self._nursery, self._token
        if nursery is None or token is None:
            self._pending.append((seconds, action))
            return

        async def wait_then() -> None:
            await trio.sleep(seconds)
            with self.lock:
                action()

        # May be called from the FUSE reader (a plan's fault firing on an
        # access): hand the scheduling to the loop.
        token.run_sync_soon(nursery.start_soon, wait_then)

    def _start_plan(self, plan: FaultPlan) -> None:
        """Make ``plan`` the one in force: count accesses, schedule times."""
        self.plan = plan
        injector = self.injector

        def on_access(ipu: int) -> None:
            for fault in plan.access(ipu):
                injector.apply(fault)

        self.filesystem.on_access = on_access
        for entry in plan.timed():
            def fire(entry: object = entry) -> None:
                if self.plan is plan:
                    fault = plan.fire_timed(entry)  # type: ignore[arg-type]
                    if fault is not None:
                        injector.apply(fault)

            self._later(entry.at or 0.0, fire)

    @staticmethod
    def prepare_mountpoint(mountpoint: str) -> None:
        """Create the mount point, or clear the dead mount of a crashed
        daemon found there; refuse a mount point that is in use."""
        if fmount.is_dead(mountpoint):
            log.warning("clearing the dead mount at %s left by a crashed daemon", mountpoint)
            fmount.unmount(mountpoint)
        os.makedirs(mountpoint, exist_ok=True)
        if os.path.ismount(mountpoint):
            raise RuntimeError(f"{mountpoint} is already a mount point")

    async def run(self, *, task_status: trio.TaskStatus[Negotiated] = trio.TASK_STATUS_IGNORED) -> None:
        self.prepare_mountpoint(self.config.mountpoint)
        try:
            async with trio.open_nursery() as nursery:
                self.driver.watcher = PidfdWatcher(nursery, self.lock)
                self._token = trio.lowlevel.current_trio_token()
                self.filesystem.tracer.token = self._token
                self._nursery = nursery
                for seconds, action in self._pending:
                    self._later(seconds, action)
                self._pending.clear()
                if self.plan is not None:
                    self._start_plan(self.plan)

                async def serve(task_status: trio.TaskStatus[Negotiated]) -> None:
                    await self.server.run(task_status=task_status)
                    nursery.cancel_scope.cancel()  # unmounted: stop the watchers

                await nursery.start(self.control.run)
                negotiated = await nursery.start(serve)
                if self.links is not None:
                    self.links.clear_stale()
                    self.links.install()
                task_status.started(negotiated)
                nursery.start_soon(self.registers.run)
        finally:
            self._nursery = None
            self.filesystem.tracer.close()
            if self.links is not None:
                self.links.remove()
            self.driver.watcher = None
            self.driver.close()
            self.devices.close()

    def call(self, action: Callable[[], T]) -> T:
        """Run a model-side action in the daemon's loop (called from within
        it), then publish what it wrote to clients that see copies."""
        with self.lock:
            result = action()
            self.filesystem.settle()
        return result

    async def call_and_wait(self, action: Callable[[], T]) -> T:
        """call(action), then wait until clients can see what it wrote."""
        result = self.call(action)
        await self.server.drain()
        return result
