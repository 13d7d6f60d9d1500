# The kubelet's pod-resources API, for tests: PodResourcesLister.List over
# real gRPC on a Unix socket, answering the allocations a test sets, as the
# kubelet reports what the device plugin allocated (tests/deviceplugin/
# kubelet.py fakes the kubelet's other half).
from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc

from ipufs.deviceplugin import podresources_pb2 as pr
from ipufs.deviceplugin import rpc


class FakePodResources:
    """Serves List on ``socket``; ``pods``: (pod, namespace, container,
    resource name, device ids) rows."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.pods: list[tuple[str, str, str, str, list[str]]] = []
        self.asked = 0
        self.failing = False  # answer UNAVAILABLE, as a kubelet that is restarting
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((rpc.pod_resources_handler(self),))
        self.server.add_insecure_port(rpc.unix_target(str(socket)))
        self.server.start()

    def List(self, request: pr.ListPodResourcesRequest,  # noqa: N802 (the API's name)
             context: grpc.ServicerContext) -> pr.ListPodResourcesResponse:
        self.asked += 1
        if self.failing:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the kubelet is restarting")
        answer = pr.ListPodResourcesResponse()
        for pod, namespace, container, resource, devices in self.pods:
            entry = answer.pod_resources.add(name=pod, namespace=namespace)
            entry.containers.add(name=container).devices.add(resource_name=resource, device_ids=devices)
        return answer

    def stop(self) -> None:
        self.server.stop(grace=None).wait(10)
