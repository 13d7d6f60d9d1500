# The ipufs daemon, the composition root: builds the parts of one mount in
# dependency order, each receiving its collaborators (the shared lock
# included) at construction; starts the parts that need the trio loop as
# tasks; clears a dead mount a crashed daemon left behind; and runs until
# cancelled. Model-side actions run in its trio loop through call().
from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from ipufs import native
from ipufs.container.cdi import SpecFile, default_prefix
from ipufs.container.follow import Holder
from ipufs.daemon.config import DaemonConfig
from ipufs.daemon.control.peers import ControlRights
from ipufs.daemon.control.operations import DeviceSide, StatusQueries
from ipufs.daemon.control.server import ControlServer
from ipufs.daemon.devlinks import DevLinks
from ipufs.daemon.execution import ExecutionRunner
from ipufs.daemon.tile_lock import TileLock
from ipufs.daemon.utilisation import Utilisation
from ipufs.daemon.faults import Fault, FaultError, FaultInjector
from ipufs.daemon.fields import Limits
from ipufs.daemon.plan import FaultPlan
from ipufs.daemon import small_file
from ipufs.daemon.plan_runner import PlanRunner
from ipufs.daemon.statelock import StateLock
from ipufs.daemon.timers import Timers
from ipufs.daemon.trace import Tracer
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.events import FaultFired
from ipufs.driver.driver import IpuDriver
from ipufs.driver.effects import ModelEffects
from ipufs.driver import sysfs_tree
from ipufs.driver.device_nodes import DeviceNodes, NoFastPath
from ipufs.driver.fast_path import FastAnswers
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.driver.mapping import BarMapping
from ipufs.driver.pollers import PollWakeups
from ipufs.driver.register_watcher import RegisterWatcher
from ipufs.driver.system import REAL
from ipufs.driver.view_files import SysfsView
from ipufs.driver.watch import PidfdWatcher
from ipufs.driver.work import DeviceWork
from ipufs.model.profile import Profile
from ipufs.fuse import mount as fmount
from ipufs.fuse import transports
from ipufs.fuse.kernel import KernelLink
from ipufs.fuse.operations import Negotiated
from ipufs.fuse.server import FuseServer
from ipufs.fuse.transport import Given

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Serving:
    """What a daemon reports once its mount is up."""

    negotiated: Negotiated
    #: How BARs are served (passthrough or page-cache) and, if not the
    #: mode asked for, why.
    mode: str
    mode_reason: str
    #: Where the /dev links were made (None: no links made).
    linked_in: str | None
    #: How requests reach the daemon (the name of a row of fuse.transports.
    #: TRANSPORTS) and why.
    transport: str


def _read_plan(path: str, limits: Limits) -> FaultPlan:
    """The fault plan a mount starts with (FaultError naming the file; a
    file that is not a regular one, or too large, is refused unread)."""
    try:
        text = small_file.read(path).decode()
        return FaultPlan.parse(text, limits)
    except UnicodeDecodeError:
        raise FaultError(f"fault plan {path}: not UTF-8 text") from None
    except small_file.FileRefused as exc:
        raise FaultError(f"fault plan {exc}") from None
    except FaultError as exc:
        raise FaultError(f"fault plan {path}: {exc}") from None


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        profile = config.validate()
        self.config = config
        #: The directories run() made for the mount point (removed at the end).
        self.created: list[str] = []
        limits = Limits.of(profile, config.ipus)
        plan = _read_plan(config.fault_plan, limits) if config.fault_plan else None  # before anything is held
        #: How requests come (ValueError: a transport switched on where it
        #: cannot serve); the start line says which serves, and why
        #: (transport_in_force).
        self.transport = transports.choose(config.transports)
        # What is held from here on (the state lock, the memfds, the trace
        # file) is given back if a later step fails; run() gives it back
        # once the daemon is built.
        with contextlib.ExitStack() as undo:
            self._build(config, profile, limits, plan, undo)
            undo.pop_all()

    def _build(self, config: DaemonConfig, profile: Profile, limits: Limits, plan: FaultPlan | None,
               undo: contextlib.ExitStack) -> None:
        self.state_lock: StateLock | None = None
        if config.state_dir is not None:
            config.state_dir.mkdir(parents=True, exist_ok=True)
            self.state_lock = StateLock(config.state_dir)  # before anything formats its files
            undo.callback(self.state_lock.release)
        #: Held by the FUSE reader thread while it handles a request, by the
        #: register watcher while it acts, and by every trio task that
        #: touches the devices, the driver or the model.
        lock = self.lock = TileLock()  # an RLock the executor task lends to the tiles while they run
        # The device and the driver.
        self.tracer = Tracer()
        self.devices = DeviceSet(profile, config.ipus, state_dir=config.state_dir,
                                 group_size=config.group_size, events=self.tracer)
        undo.callback(self.devices.close)
        tree = sysfs_tree.node_tree(config.ipus)  # the view too, before anyone holds the tree
        self.kernel = KernelLink()
        self.exits = PidfdWatcher(lock=lock)
        self.driver = IpuDriver(self.devices, exits=self.exits, events=self.tracer,
                                while_attached=config.while_attached)
        use = RegisterUse()
        mapping = BarMapping(self.devices, tree, self.kernel, passthrough=config.passthrough, use=use)
        self.effects = ModelEffects(mapping, self.driver, PollWakeups(self.devices, self.kernel), lock=lock)
        # The device side: faults, plans, timers.
        self.timers = Timers(lock=lock)
        self.work = DeviceWork(self.effects, use, lock=lock)
        self.injector = FaultInjector(self.devices, self.work, self.timers.later, on_fire=self._traced_fault)
        self.plans = PlanRunner(self.injector, self.timers)
        self.utilisation = Utilisation(profile.tiles, config.ipus, self.driver.attachments.session)
        #: set by the FUSE reader while a request waits for the lock: the
        #: executor's native loop ends its run (and offers its CPU meanwhile)
        contended = bytearray(1)
        self.execution = ExecutionRunner(self.devices, self.work, self.tracer, self.utilisation,
                                         contended=contended)
        # The native fast path: it answers the hot requests while nothing
        # around them needs Python (a trace, a fault plan, page-cache mode).
        self.fast: FastAnswers | None = None
        if config.fast_path and self.transport.kind.fast_path:
            self.fast = FastAnswers(native.FastPath(config.ipus), self.devices, tracer=self.tracer,
                                    accesses=self.plans, mapping=mapping)
            self.tracer.watchers.append(self.fast.refresh)
            self.plans.watchers.append(self.fast.refresh)
            use.elsewhere = self.fast.last
        # The filesystem and its server.
        nodes = DeviceNodes(self.devices, tree, driver=self.driver, mapping=mapping, pollers=self.effects.pollers,
                            work=self.work, use=use, accesses=self.plans,
                            fast=self.fast if self.fast is not None else NoFastPath())
        self.filesystem = IpuFilesystem(self.devices, tree, nodes=nodes, view=SysfsView(self.devices, tree),
                                        mapping=mapping, ownership=config.ownership,
                                        control_path=config.control_path, transport=self.transport_in_force)
        self.registers = RegisterWatcher(self.devices, use, self.work)
        given = Given(spin_for=config.spin_us / 1e6, fast=self.fast.path if self.fast is not None else None,
                      mapped=self.registers)
        self.server = FuseServer(
            self.filesystem, self.kernel, config.mountpoint,
            passthrough=config.passthrough,
            source=f"ipufs:{profile.name}x{config.ipus}",
            lock=lock,
            contended=contended,
            transport=functools.partial(self.transport.kind.build, given),
            quiet=self.filesystem.leaves_tiles,  # an ioctl that leaves the tiles alone does not stop them
        )
        self.links = DevLinks(config.dev_dir, config.mountpoint, tree) if config.link_dev else None
        mount_dir = os.path.realpath(config.mountpoint)  # now: later a lookup would ask this daemon
        self.cdi = (SpecFile(config.cdi_dir, mount_dir, range(config.ipus),
                             default_prefix(mount_dir) if config.cdi_prefix is None else config.cdi_prefix,
                             follow=config.cdi_follow_restarts)
                    if config.cdi_dir else None)
        self.holder = Holder(mount_dir) if self.cdi is not None and config.cdi_follow_restarts else None
        # The control socket.
        device_side = DeviceSide(self.devices, self.tracer, self.injector, self.plans, lock=lock,
                                 rights=ControlRights(config.control_group, self.driver, REAL))
        status = StatusQueries(self.devices, self.driver, self.utilisation, lambda: self.filesystem.mode,
                               self._requests)
        o = config.ownership
        self.control = ControlServer(
            config.control_path, status.operations() + device_side.operations(),
            limits=limits, lock=lock, uid=o.uid, gid=o.gid, mode=o.mode & 0o777,
        )
        if plan is not None:
            self.plans.start(plan)
        if config.trace_file:
            o = config.ownership
            self.tracer.open_file(config.trace_file, config.trace_max_bytes, uid=o.uid, gid=o.gid, mode=o.mode)
            undo.callback(self.tracer.close)

    def transport_in_force(self) -> str:
        """How requests reach this daemon now, and why."""
        return self.transport.in_force(self.server.transport)

    def _requests(self) -> int:
        """Requests served, by Python and by the fast path."""
        return self.server.session.requests + (self.fast.answered if self.fast is not None else 0)

    def _traced_fault(self, fault: Fault) -> None:
        if self.tracer.enabled:
            self.tracer.emit(FaultFired(fault.ipu, fault.describe()))

    @staticmethod
    def prepare_mountpoint(mountpoint: str) -> list[str]:
        """Create the mount point, or clear the dead mount of a crashed
        daemon found there; refuse a mount point that is in use or not a
        directory. Returns the directories it created (the mount point and
        missing parents, outermost first), which run() removes at the end."""
        if fmount.is_dead(mountpoint):
            log.warning("clearing the dead mount at %s left by a crashed daemon", mountpoint)
            fmount.unmount(mountpoint)
        if os.path.lexists(mountpoint) and not os.path.isdir(mountpoint):
            raise RuntimeError(f"{mountpoint} is a file, not a directory: ipufs mounts its nodes in a directory; "
                               "name one (it is created if missing), or remove the file")
        missing = []
        path = mountpoint
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for directory in reversed(missing):
            os.mkdir(directory)
        if os.path.ismount(mountpoint):
            raise RuntimeError(f"{mountpoint} is already a mount point")
        return missing[::-1]

    async def run(self, *, task_status: trio.TaskStatus[Serving] = trio.TASK_STATUS_IGNORED) -> None:
        """Mount and serve until cancelled or unmounted; ``task_status``
        gets a Serving once clients may use the nodes."""
        created = self.created = self.prepare_mountpoint(self.config.mountpoint)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.tracer.run)
                await nursery.start(self.exits.run)
                await nursery.start(self.timers.run)
                await nursery.start(self.execution.run)

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
                    if self.holder is not None:  # (off this thread: the bind looks the mount up)
                        await trio.to_thread.run_sync(self.holder.install)
                    if self.cdi is not None:
                        self.cdi.write()
                linked = self.links is not None and bool(self.links.made)
                task_status.started(Serving(negotiated, self.filesystem.mode, self.filesystem.mode_reason,
                                            self.config.dev_dir if linked else None, self.transport_in_force()))
                nursery.start_soon(self.registers.run)
        finally:
            if self.cdi is not None:
                self.cdi.remove()
            if self.holder is not None:
                self.holder.remove()
            if self.links is not None:
                self.links.remove()
            self.driver.close()
            self.devices.close()
            if self.state_lock is not None:
                self.state_lock.release()
            for directory in reversed(created):  # what this daemon made, if it is empty again
                try:
                    os.rmdir(directory)
                except OSError:
                    break

    def call(self, action: Callable[[], T]) -> T:
        """Run a model-side action in the daemon's loop (called from within
        it), then carry out its effects (signals, page-cache copies)."""
        return self.work.act(None, action)

    async def call_and_wait(self, action: Callable[[], T]) -> T:
        """call(action), then wait until clients can see what it wrote."""
        result = self.call(action)
        await self.kernel.drain()
        return result
