# The two gRPC services of the device plugin API (api.proto), and the
# kubelet's pod-resources lister (podresources.proto), bound by hand to
# grpcio, typed: each method is one row of a table naming its request and
# answer messages, from which both the serving side and the calling side
# are built. The plugin serves DevicePlugin and calls Registration; kubelet
# (and the test kubelet) the other way round. gRPC method paths are
# "/<package>.<service>/<method>", so these names are the wire contract.
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from ipufs.deviceplugin import api_pb2 as api
from ipufs.deviceplugin import podresources_pb2 as pr

VERSION = "v1beta1"
REGISTRATION = f"{VERSION}.Registration"
DEVICE_PLUGIN = f"{VERSION}.DevicePlugin"


@dataclass(frozen=True)
class Method:
    name: str
    request: Any  # the message class (api_pb2 classes share no typed base)
    response: Any
    streams: bool = False  # the answer is a stream of responses


DEVICE_PLUGIN_METHODS = (
    Method("GetDevicePluginOptions", api.Empty, api.DevicePluginOptions),
    Method("ListAndWatch", api.Empty, api.ListAndWatchResponse, streams=True),
    Method("GetPreferredAllocation", api.PreferredAllocationRequest, api.PreferredAllocationResponse),
    Method("Allocate", api.AllocateRequest, api.AllocateResponse),
    Method("PreStartContainer", api.PreStartContainerRequest, api.PreStartContainerResponse),
)
REGISTRATION_METHODS = (Method("Register", api.RegisterRequest, api.Empty),)
#: The kubelet's pod-resources API (/var/lib/kubelet/pod-resources/kubelet.sock).
POD_RESOURCES = "v1.PodResourcesLister"
POD_RESOURCES_METHODS = (Method("List", pr.ListPodResourcesRequest, pr.ListPodResourcesResponse),)


class DevicePluginService(Protocol):
    """What a device plugin answers (the DevicePlugin service)."""

    def GetDevicePluginOptions(self, request: api.Empty, context: grpc.ServicerContext) -> api.DevicePluginOptions: ...

    def ListAndWatch(self, request: api.Empty, context: grpc.ServicerContext) -> Iterator[api.ListAndWatchResponse]: ...

    def GetPreferredAllocation(self, request: api.PreferredAllocationRequest,
                               context: grpc.ServicerContext) -> api.PreferredAllocationResponse: ...

    def Allocate(self, request: api.AllocateRequest, context: grpc.ServicerContext) -> api.AllocateResponse: ...

    def PreStartContainer(self, request: api.PreStartContainerRequest,
                          context: grpc.ServicerContext) -> api.PreStartContainerResponse: ...


class RegistrationService(Protocol):
    """What kubelet answers on its socket (the Registration service)."""

    def Register(self, request: api.RegisterRequest, context: grpc.ServicerContext) -> api.Empty: ...


def _handler(service: str, methods: tuple[Method, ...], servicer: object) -> grpc.GenericRpcHandler:
    table: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for m in methods:
        make = grpc.unary_stream_rpc_method_handler if m.streams else grpc.unary_unary_rpc_method_handler
        table[m.name] = make(getattr(servicer, m.name), request_deserializer=m.request.FromString,
                             response_serializer=m.response.SerializeToString)
    return grpc.method_handlers_generic_handler(service, table)


def device_plugin_handler(servicer: DevicePluginService) -> grpc.GenericRpcHandler:
    return _handler(DEVICE_PLUGIN, DEVICE_PLUGIN_METHODS, servicer)


def registration_handler(servicer: RegistrationService) -> grpc.GenericRpcHandler:
    return _handler(REGISTRATION, REGISTRATION_METHODS, servicer)


def _callable(channel: grpc.Channel, service: str, m: Method) -> Callable[..., Any]:
    make = channel.unary_stream if m.streams else channel.unary_unary
    return make(f"/{service}/{m.name}", request_serializer=m.request.SerializeToString,
                response_deserializer=m.response.FromString)


class DevicePluginClient:
    """Calls a device plugin's methods (what kubelet does)."""

    def __init__(self, channel: grpc.Channel) -> None:
        calls = {m.name: _callable(channel, DEVICE_PLUGIN, m) for m in DEVICE_PLUGIN_METHODS}
        self.GetDevicePluginOptions: grpc.UnaryUnaryMultiCallable[api.Empty, api.DevicePluginOptions] = \
            calls["GetDevicePluginOptions"]  # type: ignore[assignment]
        self.ListAndWatch: grpc.UnaryStreamMultiCallable[api.Empty, api.ListAndWatchResponse] = \
            calls["ListAndWatch"]  # type: ignore[assignment]
        self.GetPreferredAllocation: grpc.UnaryUnaryMultiCallable[
            api.PreferredAllocationRequest, api.PreferredAllocationResponse] = \
            calls["GetPreferredAllocation"]  # type: ignore[assignment]
        self.Allocate: grpc.UnaryUnaryMultiCallable[api.AllocateRequest, api.AllocateResponse] = \
            calls["Allocate"]  # type: ignore[assignment]
        self.PreStartContainer: grpc.UnaryUnaryMultiCallable[
            api.PreStartContainerRequest, api.PreStartContainerResponse] = \
            calls["PreStartContainer"]  # type: ignore[assignment]


class RegistrationClient:
    """Calls kubelet's Register (what a device plugin does)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.Register: grpc.UnaryUnaryMultiCallable[api.RegisterRequest, api.Empty] = \
            _callable(channel, REGISTRATION, REGISTRATION_METHODS[0])  # type: ignore[assignment]


class PodResourcesService(Protocol):
    """What the kubelet answers on its pod-resources socket (List only)."""

    def List(self, request: pr.ListPodResourcesRequest,
             context: grpc.ServicerContext) -> pr.ListPodResourcesResponse: ...


def pod_resources_handler(servicer: PodResourcesService) -> grpc.GenericRpcHandler:
    return _handler(POD_RESOURCES, POD_RESOURCES_METHODS, servicer)


class PodResourcesClient:
    """Asks the kubelet which devices each pod's containers hold."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.List: grpc.UnaryUnaryMultiCallable[pr.ListPodResourcesRequest, pr.ListPodResourcesResponse] = \
            _callable(channel, POD_RESOURCES, POD_RESOURCES_METHODS[0])  # type: ignore[assignment]


def unix_target(path: str) -> str:
    """The gRPC address of a Unix socket at an absolute ``path``."""
    return f"unix://{path}"
