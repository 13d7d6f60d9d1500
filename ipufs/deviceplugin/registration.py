# Serving the plugin on its socket in kubelet's device plugin directory and
# registering it with kubelet (the device plugin documentation's
# lifecycle): serve first, since kubelet connects back while it answers
# Register; register again whenever kubelet's socket is a new one (kubelet
# restarted); and when kubelet, starting, has removed the plugin's socket
# with everything else in the directory, serve on a new one before that.
# Sockets are watched by inode and change time, every check_interval.
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from ipufs.deviceplugin import api_pb2 as api
from ipufs.deviceplugin import rpc
from ipufs.deviceplugin.plugin import WORKERS, IpuDevicePlugin

log = logging.getLogger(__name__)

DEFAULT_SOCKET_DIR = Path("/var/lib/kubelet/device-plugins")
KUBELET_SOCKET = "kubelet.sock"


Identity = tuple[int, int, int]


def _identity(path: Path) -> Identity | None:
    """Which file ``path`` is: a socket made anew may get the inode number
    of the one it replaced, but not its change time."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


class Registrar:
    def __init__(self, plugin: IpuDevicePlugin, resource_name: str, *, socket_dir: Path = DEFAULT_SOCKET_DIR,
                 endpoint: str, check_interval: float = 0.25, retry_interval: float = 1.0,
                 register_timeout: float = 10.0) -> None:
        self.plugin = plugin
        self.resource_name = resource_name
        self.socket_dir = socket_dir
        self.endpoint = endpoint
        self.check_interval = check_interval
        self.retry_interval = retry_interval
        self.register_timeout = register_timeout

    @property
    def socket(self) -> Path:
        return self.socket_dir / self.endpoint

    @property
    def kubelet_socket(self) -> Path:
        return self.socket_dir / KUBELET_SOCKET

    def _serve(self) -> tuple[grpc.Server, Identity | None]:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.socket.unlink()  # left by a plugin that died
        except FileNotFoundError:
            pass
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="ipufs-device-plugin"))
        server.add_generic_rpc_handlers((rpc.device_plugin_handler(self.plugin),))
        server.add_insecure_port(rpc.unix_target(str(self.socket)))
        server.start()
        log.info("serving %s on %s", self.resource_name, self.socket)
        return server, _identity(self.socket)

    def _register(self) -> None:
        options = api.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)
        request = api.RegisterRequest(version=rpc.VERSION, endpoint=self.endpoint, resource_name=self.resource_name,
                                      options=options)
        with grpc.insecure_channel(rpc.unix_target(str(self.kubelet_socket))) as channel:
            rpc.RegistrationClient(channel).Register(request, timeout=self.register_timeout)

    def run(self, stop: threading.Event, on_registered: Callable[[], None] | None = None) -> None:
        """Serve and keep registered until ``stop`` is set."""
        while not stop.is_set():
            server, ours = self._serve()
            try:
                self._keep_registered(stop, ours, on_registered)
            finally:
                server.stop(grace=None)
                if _identity(self.socket) == ours:
                    self.socket.unlink()

    def _keep_registered(self, stop: threading.Event, ours: Identity | None,
                         on_registered: Callable[[], None] | None) -> None:
        registered_with: Identity | None = None
        last_error = ""
        while not stop.is_set():
            if _identity(self.socket) != ours:
                log.info("%s was removed (kubelet restarted?): serving on a new socket", self.socket)
                return
            kubelet = _identity(self.kubelet_socket)
            if kubelet is not None and kubelet != registered_with:
                try:
                    self._register()
                except grpc.RpcError as exc:
                    error = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                    if error != last_error:
                        log.warning("registering with kubelet at %s failed: %s", self.kubelet_socket, error)
                        last_error = error
                    stop.wait(self.retry_interval)
                    continue
                registered_with, last_error = kubelet, ""
                log.info("registered %s with kubelet at %s", self.resource_name, self.kubelet_socket)
                if on_registered is not None:
                    on_registered()
            stop.wait(self.check_interval)
