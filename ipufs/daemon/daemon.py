# The ipufs daemon: builds the devices, the filesystem and the FUSE server
# for one mount, clears a dead mount a crashed daemon left behind, and runs
# until cancelled. Model-side actions run in its trio loop through call().
from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable
from typing import TypeVar

import trio

from ipufs.abi.icu import op_name
from ipufs.container.cdi import SpecFile, default_prefix
from ipufs.daemon.config import DaemonConfig
from ipufs.daemon.control.operations import DeviceSide, StatusQueries
from ipufs.daemon.control.server import ControlServer
from ipufs.driver.devices import DeviceSet
from ipufs.daemon.devlinks import DevLinks
from ipufs.daemon.register_watcher import RegisterWatcher
from ipufs.daemon.faults import Fault, FaultError, FaultInjector, limits_of
from ipufs.daemon.plan import FaultPlan
from ipufs.daemon.statelock import StateLock
from ipufs.daemon.trace import Tracer
from ipufs.driver.driver import IpuDriver
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.driver.watch import PidfdWatcher
from ipufs.fuse import mount as fmount
from ipufs.fuse.operations import Negotiated
from ipufs.fuse.server import FuseServer

log = logging.getLogger(__name__)
T = TypeVar("T")

class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        profile = config.validate()
        self.config = config
        self.state_lock: StateLock | None = None
        if config.state_dir is not None:
            config.state_dir.mkdir(parents=True, exist_ok=True)
            self.state_lock = StateLock(config.state_dir)  # before anything formats its files
        #: Held by the FUSE reader thread while it handles a request, and by
        #: every trio task that touches the devices, the driver or the model.
        self.lock = threading.RLock()
        self.devices = DeviceSet(profile, config.ipus, state_dir=config.state_dir,
                                 group_size=config.group_size)
        self.tracer = Tracer()
        self.driver = IpuDriver(self.devices, events=self.tracer)
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
        mount_dir = os.path.realpath(config.mountpoint)  # now: later a lookup would ask this daemon
        self.cdi = (SpecFile(config.cdi_dir, mount_dir, range(config.ipus),
                             default_prefix(mount_dir) if config.cdi_prefix is None else config.cdi_prefix)
                    if config.cdi_dir else None)
        self.injector = FaultInjector(self.filesystem, self._later)
        self.injector.on_fire = self._traced_fault
        self.device_side = DeviceSide(self.filesystem, self.tracer, self.injector, self._start_plan, lock=self.lock)
        self.plan: FaultPlan | None = None
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._pending: list[tuple[float, Callable[[], None]]] = []
        if config.fault_plan:
            with open(config.fault_plan) as f:
                text = f.read()
            try:
                self.plan = FaultPlan.parse(text, limits_of(self.filesystem))
            except FaultError as exc:
                raise FaultError(f"fault plan {config.fault_plan}: {exc}") from None
            self.device_side.plan = self.plan
        if config.trace_file:
            o = config.ownership
            self.tracer.open_file(config.trace_file, config.trace_max_bytes, uid=o.uid, gid=o.gid, mode=o.mode)
        for ipu in self.devices.ipus:
            ipu.icu.observer = self._icu_observer(ipu.index)
        o = config.ownership
        status = StatusQueries(self.filesystem, lambda: self.server.session.requests)
        self.control = ControlServer(
            config.control_path, status.operations() + self.device_side.operations(),
            limits=limits_of(self.filesystem), lock=self.lock, uid=o.uid, gid=o.gid, mode=o.mode & 0o777,
        )

    def _icu_observer(self, index: int) -> Callable[[tuple[int, ...], tuple[int, ...] | None], None]:
        tracer = self.tracer

        def observe(request: tuple[int, ...], answer: tuple[int, ...] | None) -> None:
            if tracer.enabled:
                tracer.emit("icu", index, op=op_name(request[0]),
                            request=[hex(w) for w in request],
                            answer=None if answer is None else [hex(w) for w in answer])

        return observe

    def _traced_fault(self, fault: Fault) -> None:
        if self.tracer.enabled:
            self.tracer.emit("fault", fault.ipu, fault=fault.describe())

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` in the loop after ``seconds`` (an ICU timeout's end)."""
        if not math.isfinite(seconds) or seconds < 0:  # the edge checks; a NaN timer would end the loop
            raise ValueError(f"not a delay: {seconds!r}")
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
                self.driver.watcher = PidfdWatcher(nursery, lock=self.lock)
                self._token = trio.lowlevel.current_trio_token()
                self.tracer.token = self._token
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
                # A mount aborted while this daemon started (stopped, then
                # `ipufs umount --abort`) may already have a successor: then
                # the links and the spec at these names are not ours to make.
                if self.server.connected():
                    if self.links is not None:
                        self.links.clear_stale()
                        self.links.install()
                    if self.cdi is not None:
                        self.cdi.write()
                task_status.started(negotiated)
                nursery.start_soon(self.registers.run)
        finally:
            self._nursery = None
            if self.cdi is not None:
                self.cdi.remove()
            self.tracer.close()
            if self.links is not None:
                self.links.remove()
            self.driver.watcher = None
            self.driver.close()
            self.devices.close()
            if self.state_lock is not None:
                self.state_lock.release()

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
