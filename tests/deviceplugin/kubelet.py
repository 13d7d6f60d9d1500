# kubelet's half of the device plugin API, for tests: written from the
# published v1beta1 API and kubelet's documented behaviour, over real gRPC
# on a real Unix socket. It serves Registration on kubelet.sock; on
# Register it checks the version and the resource name as kubelet does,
# connects back to the plugin's socket before answering, asks its options
# and follows its ListAndWatch stream from a thread, keeping every list it
# is sent. Starting (and restarting) removes every socket in the directory
# first, as kubelet does.
from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ipufs.deviceplugin import api_pb2 as api
from ipufs.deviceplugin import rpc

TIMEOUT = 10.0
_EXTENDED = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass
class PluginConnection:
    """One registration: the plugin's answers and the lists it streamed."""

    resource_name: str
    endpoint: str
    options: api.DevicePluginOptions
    channel: grpc.Channel
    client: rpc.DevicePluginClient
    lists: list[dict[str, str]] = field(default_factory=list)  # device id -> health, per update
    topology: dict[str, list[int]] = field(default_factory=dict)
    ended: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def follow(self, stream: grpc.UnaryStreamMultiCallable[api.Empty, api.ListAndWatchResponse]) -> None:
        try:
            for answer in stream(api.Empty()):
                with self._changed:
                    self.lists.append({d.ID: d.health for d in answer.devices})
                    self.topology = {d.ID: [n.ID for n in d.topology.nodes] for d in answer.devices}
                    self._changed.notify_all()
        except grpc.RpcError:
            pass  # the plugin or this kubelet went away
        finally:
            self.ended.set()
            with self._changed:
                self._changed.notify_all()

    def latest(self) -> dict[str, str]:
        with self._changed:
            return dict(self.lists[-1]) if self.lists else {}

    def wait_list(self, predicate: Callable[[dict[str, str]], bool], timeout: float = TIMEOUT) -> dict[str, str]:
        """The first list (already sent or to come) that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for devices in self.lists[seen:]:
                    if predicate(devices):
                        return dict(devices)
                seen = len(self.lists)
                left = deadline - time.monotonic()
                if left <= 0 or self.ended.is_set():
                    raise AssertionError(f"no such device list within {timeout} s; got {self.lists}")
                self._changed.wait(left)


class TestKubelet:
    """Serves kubelet.sock in ``socket_dir``; ``registrations`` receives
    each plugin connection once it is established."""

    __test__ = False  # not a test class, despite its name

    def __init__(self, socket_dir: Path) -> None:
        self.socket_dir = socket_dir
        self.connections: list[PluginConnection] = []
        self.registrations: queue.Queue[PluginConnection] = queue.Queue()
        self.refused: list[str] = []
        self._server: grpc.Server | None = None
        self._threads: list[threading.Thread] = []

    @property
    def socket(self) -> Path:
        return self.socket_dir / "kubelet.sock"

    def start(self, clean: bool = True) -> None:
        """Serve on a new kubelet.sock; ``clean`` removes every other socket
        first, as kubelet does when it starts."""
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        for entry in self.socket_dir.iterdir():
            if entry.is_socket() and (clean or entry == self.socket):
                entry.unlink()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="test-kubelet"))
        server.add_generic_rpc_handlers((rpc.registration_handler(self),))
        server.add_insecure_port(rpc.unix_target(str(self.socket)))
        server.start()
        self._server = server

    def stop(self) -> None:
        for connection in self.connections:
            connection.channel.close()
        if self._server is not None:
            self._server.stop(grace=None).wait(TIMEOUT)
            self._server = None
        for t in self._threads:
            t.join(TIMEOUT)
        self._threads.clear()

    def restart(self) -> None:
        self.stop()
        self.start()

    def next_registration(self, timeout: float = TIMEOUT) -> PluginConnection:
        try:
            return self.registrations.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no plugin registered within {timeout} s (refused: {self.refused})") from None

    # --- the Registration service ------------------------------------------------
    def Register(self, request: api.RegisterRequest, context: grpc.ServicerContext) -> api.Empty:
        if request.version != rpc.VERSION:
            self._refuse(context, f"requested device plugin API version {request.version} is not supported")
        name = request.resource_name
        if not _EXTENDED.match(name) or name.split("/")[0].endswith("kubernetes.io"):
            self._refuse(context, f"the ResourceName {name!r} is invalid")
        channel = grpc.insecure_channel(rpc.unix_target(str(self.socket_dir / request.endpoint)))
        try:
            grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
            client = rpc.DevicePluginClient(channel)
            options = client.GetDevicePluginOptions(api.Empty(), timeout=TIMEOUT)
        except (grpc.RpcError, grpc.FutureTimeoutError) as exc:
            channel.close()
            self._refuse(context, f"cannot connect to the plugin at {request.endpoint}: {exc!r}")
        connection = PluginConnection(name, request.endpoint, options, channel, client)
        follower = threading.Thread(target=connection.follow, args=(client.ListAndWatch,), daemon=True)
        follower.start()
        self._threads.append(follower)
        self.connections.append(connection)
        self.registrations.put(connection)
        return api.Empty()

    def _refuse(self, context: grpc.ServicerContext, message: str) -> None:
        self.refused.append(message)
        context.abort(grpc.StatusCode.UNKNOWN, message)
