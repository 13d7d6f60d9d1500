# Which pod each IPU is allocated to, from the kubelet's pod-resources API
# (gRPC v1 PodResourcesLister.List on /var/lib/kubelet/pod-resources/
# kubelet.sock), as NVIDIA's DCGM exporter labels GPUs: the kubelet lists
# every container's devices by the ids the device plugin advertised, so an
# IPU's id (ipu0, ipu1...: ipufs/deviceplugin/inventory.py) finds its pod,
# namespace and container. Asked only where that socket exists; it needs
# the `kubernetes` extra (grpcio), as the device plugin does.
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

from ipufs.deviceplugin.inventory import DEFAULT_RESOURCE
from ipufs.monitoring.reading import Pod

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")


class PodResourcesError(RuntimeError):
    """The kubelet could not be asked; the message says why."""


class PodResources:
    """The kubelet's allocations of ``resource_name`` devices, asked
    through ``socket`` with a ``timeout`` (seconds) per question."""

    def __init__(self, socket: Path = DEFAULT_SOCKET, resource_name: str = DEFAULT_RESOURCE,
                 timeout: float = 2.0) -> None:
        self.socket = socket
        self.resource_name = resource_name
        self.timeout = timeout
        self._channel: Any = None
        self._client: Any = None
        self._lock = threading.Lock()

    def present(self) -> bool:
        """Whether the kubelet's socket is there (not a Kubernetes node: not)."""
        try:
            return stat.S_ISSOCK(os.stat(self.socket).st_mode)
        except OSError:
            return False

    def allocations(self) -> dict[str, Pod]:
        """Device id -> the pod, namespace and container holding it."""
        try:
            import grpc

            from ipufs.deviceplugin import podresources_pb2 as pr
            from ipufs.deviceplugin.rpc import PodResourcesClient, unix_target
        except ImportError as exc:
            raise PodResourcesError(f"asking the kubelet needs grpcio (pip install 'ipufs[kubernetes]'): {exc}") \
                from None
        with self._lock:
            if self._client is None:
                self._channel = grpc.insecure_channel(unix_target(str(self.socket)))
                self._client = PodResourcesClient(self._channel)
            client = self._client
        try:
            answer = client.List(pr.ListPodResourcesRequest(), timeout=self.timeout)
        except grpc.RpcError as exc:
            self.close()  # a new channel next time: the kubelet may have restarted
            raise PodResourcesError(f"the kubelet's pod-resources API at {self.socket} did not answer: "
                                    f"{exc.code().name if hasattr(exc, 'code') else exc}") from None
        found: dict[str, Pod] = {}
        for pod in answer.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    if devices.resource_name == self.resource_name:
                        for device in devices.device_ids:
                            found[device] = Pod(pod.name, pod.namespace, container.name)
        return found

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            self._channel = self._client = None
