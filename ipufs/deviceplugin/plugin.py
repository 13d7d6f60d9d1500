# The DevicePlugin service (api.proto) over a DeviceWatch: the device list
# and its health as a stream, the preferred placement, and what each
# container gets. A request the plugin cannot meet (an unknown device, more
# IPUs than the node has, no daemon) is answered with a gRPC error whose
# message says why; nothing a caller sends stops the plugin serving.
# grpcio serves each call on a thread of a fixed pool and a ListAndWatch
# stream holds its thread for as long as it lasts, so streams are bounded
# (MAX_WATCHERS) below the pool's size: however many watchers come, the
# rest of the pool is left for Allocate and the other short calls.
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from ipufs.deviceplugin import api_pb2 as api
from ipufs.deviceplugin import edits, placement
from ipufs.deviceplugin.inventory import Inventory, device_id, ipu_of
from ipufs.deviceplugin.sysfs_dirs import DEFAULT_SYSFS_DIR, SysfsDirs
from ipufs.deviceplugin.watch import DeviceWatch, State

log = logging.getLogger(__name__)

#: ListAndWatch streams served at once; kubelet keeps one (two for a moment
#: when it restarts). One more is refused with RESOURCE_EXHAUSTED.
MAX_WATCHERS = 4
#: Threads the gRPC server needs: one per stream, and as many again for
#: the short calls (Allocate, GetPreferredAllocation, options).
WORKERS = 2 * MAX_WATCHERS


@dataclass(frozen=True)
class AllocationStyle:
    """How Allocate gives IPUs: by bind mounts, or (``cdi``, for runtimes
    that read CDI) by the names of the mount's CDI spec, under
    ``cdi_prefix`` (None: the prefix the daemon chooses for its mount).
    Bind mounts put /sys/bus/pci/devices in directories under
    ``sysfs_dir`` (sysfs_dirs.py)."""

    cdi: bool = False
    cdi_prefix: str | None = None
    sysfs_dir: Path = DEFAULT_SYSFS_DIR


def device_list(state: State) -> api.ListAndWatchResponse:
    inventory = state.inventory
    if inventory is None:
        return api.ListAndWatchResponse()
    return api.ListAndWatchResponse(devices=[
        api.Device(ID=device_id(ipu), health=state.health[ipu].state,
                   topology=api.TopologyInfo(nodes=[api.NUMANode(ID=inventory.numa[ipu])]))
        for ipu in inventory.ipus])


class IpuDevicePlugin:
    """Serves the node's IPUs to kubelet (rpc.DevicePluginService)."""

    def __init__(self, watch: DeviceWatch, style: AllocationStyle = AllocationStyle()) -> None:
        self.watch = watch
        self.style = style
        self.sysfs = SysfsDirs(style.sysfs_dir)
        self.stopping = threading.Event()
        self.watchers = threading.BoundedSemaphore(MAX_WATCHERS)

    # --- helpers ------------------------------------------------------------------
    def _inventory(self, context: grpc.ServicerContext) -> Inventory:
        state = self.watch.state
        if state.inventory is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"no IPUs to give: {state.problem}")
        return state.inventory

    def _ipus(self, ids: Sequence[str], inventory: Inventory, context: grpc.ServicerContext) -> list[int]:
        """The IPUs ``ids`` name, or an INVALID_ARGUMENT error."""
        known = set(inventory.ipus)
        unknown = [d for d in ids if ipu_of(d) not in known]
        if unknown:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"unknown device {', '.join(unknown)}: this node has {', '.join(inventory.ids())}")
        ipus = [ipu for ipu in (ipu_of(d) for d in ids) if ipu is not None]
        if len(set(ipus)) != len(ipus):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"a device is named twice in {', '.join(ids)}")
        return ipus

    # --- the service ------------------------------------------------------------
    def GetDevicePluginOptions(self, request: api.Empty, context: grpc.ServicerContext) -> api.DevicePluginOptions:
        return api.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(self, request: api.Empty, context: grpc.ServicerContext) -> Iterator[api.ListAndWatchResponse]:
        if not self.watchers.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"at most {MAX_WATCHERS} ListAndWatch streams at once (kubelet needs one); "
                          "try again once one has ended")
        try:
            state = self.watch.state
            yield device_list(state)
            while context.is_active() and not self.stopping.is_set():
                # Wakes at least once a second to see whether kubelet went away.
                newer = self.watch.wait_newer(state.version, timeout=1.0)
                if newer.version != state.version:
                    state = newer
                    yield device_list(state)
        finally:
            self.watchers.release()

    def GetPreferredAllocation(self, request: api.PreferredAllocationRequest,
                               context: grpc.ServicerContext) -> api.PreferredAllocationResponse:
        inventory = self._inventory(context)
        answers = []
        for container in request.container_requests:
            available = self._ipus(container.available_deviceIDs, inventory, context)
            must = self._ipus(container.must_include_deviceIDs, inventory, context)
            try:
                chosen = placement.preferred(available, must, container.allocation_size, inventory.groups)
            except placement.PlacementError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            answers.append(api.ContainerPreferredAllocationResponse(deviceIDs=[device_id(i) for i in chosen]))
        return api.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request: api.AllocateRequest, context: grpc.ServicerContext) -> api.AllocateResponse:
        inventory = self._inventory(context)
        answers = []
        for container in request.container_requests:
            if len(container.devices_ids) > len(inventory.ipus):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"asked for {len(container.devices_ids)} IPUs; "
                              f"this node has {len(inventory.ipus)}")
            ipus = self._ipus(container.devices_ids, inventory, context)
            if not ipus:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a container asked for no device")
            answers.append(self._container(inventory, ipus, context))
            log.info("allocated %s", ", ".join(device_id(i) for i in ipus))
        return api.AllocateResponse(container_responses=answers)

    def _container(self, inventory: Inventory, ipus: list[int],
                   context: grpc.ServicerContext) -> api.ContainerAllocateResponse:
        if self.style.cdi:
            prefix = self.style.cdi_prefix
            if prefix is None:
                prefix = edits.default_cdi_prefix(inventory.mountpoint)
            # The spec's own edits include the environment every client
            # needs; the variable naming the IPUs is the plugin's.
            return api.ContainerAllocateResponse(
                envs={edits.VISIBLE_IPUS: edits.visible(ipus)},
                cdi_devices=[api.CDIDevice(name=n) for n in edits.cdi_names(prefix, ipus)])
        try:
            devices_dir = self.sysfs.for_ipus(ipus)
            library = self.sysfs.library()
        except OSError as exc:
            context.abort(grpc.StatusCode.INTERNAL, "cannot make the container's /sys/bus/pci/devices and "
                          f"library in {self.style.sysfs_dir}: {exc.strerror or exc}")
        given = edits.container_edits(inventory.mountpoint, ipus, str(devices_dir), str(library))
        env = dict(given.env)
        return api.ContainerAllocateResponse(
            envs=env, mounts=[api.Mount(container_path=b.target, host_path=b.source, read_only=b.read_only)
                              for b in given.binds])

    def PreStartContainer(self, request: api.PreStartContainerRequest,
                          context: grpc.ServicerContext) -> api.PreStartContainerResponse:
        return api.PreStartContainerResponse()
