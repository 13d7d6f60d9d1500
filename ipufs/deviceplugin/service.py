# `ipufs device-plugin`, put together: the watch over the mount's IPUs, the
# DevicePlugin service over it, and the registrar that serves it to kubelet
# (docs/kubernetes.md). Runs until its stop event is set (SIGTERM, SIGINT).
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ipufs.container.cdi import check_prefix
from ipufs.deviceplugin.inventory import DEFAULT_RESOURCE
from ipufs.deviceplugin.plugin import AllocationStyle, IpuDevicePlugin
from ipufs.deviceplugin.registration import DEFAULT_SOCKET_DIR, Registrar
from ipufs.deviceplugin.sysfs_dirs import DIR_NAME
from ipufs.deviceplugin.watch import DeviceWatch

log = logging.getLogger(__name__)

# An extended resource name as kubelet accepts it: a DNS subdomain outside
# kubernetes.io, a slash, a name.
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class PluginConfig:
    dev: Path
    resource_name: str = DEFAULT_RESOURCE
    socket_dir: Path = DEFAULT_SOCKET_DIR
    endpoint: str | None = None  # default: from the resource name
    cdi: bool = False  # answer Allocate with the names of the mount's CDI spec
    cdi_prefix: str | None = None  # their prefix (None: as the daemon chooses)
    poll_interval: float = 1.0
    retry_interval: float = 0.5
    sysfs_dir: Path | None = None  # bind-mount answers' /sys/bus/pci/devices (None: SOCKET_DIR/ipufs-sysfs)

    def socket_name(self) -> str:
        return self.endpoint or "ipufs-" + re.sub(r"[^A-Za-z0-9_.-]", "_", self.resource_name) + ".sock"


def check(config: PluginConfig) -> None:
    """Refuse, with a one-line reason, a configuration kubelet would refuse."""
    name = config.resource_name
    if not _RESOURCE.match(name) or name.split("/")[0].endswith("kubernetes.io"):
        raise ValueError(f"{name!r} is not an extended resource: vendor-domain/name, outside kubernetes.io")
    if config.cdi_prefix:
        check_prefix(config.cdi_prefix)
    endpoint = config.socket_name()
    if "/" in endpoint or endpoint in ("kubelet.sock", "", ".", ".."):
        raise ValueError(f"--endpoint {endpoint!r} must be a file name in the socket directory, not kubelet.sock")
    if config.poll_interval <= 0 or config.retry_interval <= 0:
        raise ValueError("intervals must be positive")


def run(config: PluginConfig, stop: threading.Event, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until ``stop`` is set; ``on_ready`` hears of each registration."""
    check(config)
    watch = DeviceWatch(config.dev, poll_interval=config.poll_interval, retry_interval=config.retry_interval)
    plugin = IpuDevicePlugin(watch, AllocationStyle(config.cdi, config.cdi_prefix,
                                                  config.sysfs_dir or config.socket_dir / DIR_NAME))
    registrar = Registrar(plugin, config.resource_name, socket_dir=config.socket_dir, endpoint=config.socket_name())

    def registered() -> None:
        if on_ready is not None:
            state = watch.state
            count = len(state.inventory.ipus) if state.inventory else 0
            on_ready(f"{count} IPUs of {config.dev} offered as {config.resource_name}")

    watch.start()
    try:
        # Register once the watch has looked (or given up looking): kubelet's
        # first list is then the node's, not an empty one.
        watch.wait_newer(0, timeout=10)
        registrar.run(stop, registered)
    finally:
        plugin.stopping.set()
        watch.stop()
