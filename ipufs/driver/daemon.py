# The ipufs daemon: builds the devices, the filesystem and the FUSE server
# for one mount, clears a dead mount a crashed daemon left behind, and runs
# until cancelled. Model-side actions run in its trio loop through call().
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import trio

from ipufs.control.operations import Operations
from ipufs.control.server import ControlServer
from ipufs.driver.devices import DeviceSet
from ipufs.driver.devlinks import DevLinks
from ipufs.driver.doorbells import RegisterWatcher
from ipufs.driver.driver import IpuDriver
from ipufs.driver.filesystem import IpuFilesystem, Ownership
from ipufs.driver.watch import PidfdWatcher
from ipufs.fuse import mount as fmount
from ipufs.fuse.operations import Negotiated
from ipufs.fuse.server import FuseServer
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
        return PROFILES[self.profile]


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        profile = config.validate()
        self.config = config
        if config.state_dir is not None:
            config.state_dir.mkdir(parents=True, exist_ok=True)
        self.devices = DeviceSet(profile, config.ipus, state_dir=config.state_dir,
                                 group_size=config.group_size)
        self.driver = IpuDriver(self.devices)
        self.filesystem = IpuFilesystem(
            self.devices, driver=self.driver, ownership=config.ownership,
            passthrough=config.passthrough,
        )
        self.server = FuseServer(
            self.filesystem,
            config.mountpoint,
            passthrough=config.passthrough,
            source=f"ipufs:{profile.name}x{config.ipus}",
        )
        self.filesystem.attach_kernel(self.server)
        self.registers = RegisterWatcher(self.filesystem)
        self.links = DevLinks(config.dev_dir, config.mountpoint, self.filesystem.tree) if config.link_dev else None
        self.filesystem.control_path = config.control_path
        o = config.ownership
        self.control = ControlServer(config.control_path, Operations(self.filesystem).handlers(),
                                     uid=o.uid, gid=o.gid, mode=o.mode & 0o777)

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
                self.driver.watcher = PidfdWatcher(nursery)

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
            if self.links is not None:
                self.links.remove()
            self.driver.watcher = None
            self.driver.close()
            self.devices.close()

    def call(self, action: Callable[[], T]) -> T:
        """Run a model-side action in the daemon's loop (called from within
        it), then publish what it wrote to clients that see copies."""
        result = action()
        self.filesystem.settle()
        return result

    async def call_and_wait(self, action: Callable[[], T]) -> T:
        """call(action), then wait until clients can see what it wrote."""
        result = self.call(action)
        await self.server.drain()
        return result
