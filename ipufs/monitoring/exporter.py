# `ipufs exporter`, and the daemon's own (`ipufs mount --exporter`): GET
# /metrics answers the IPUs' metrics (metrics.py) in the Prometheus text
# format, or OpenMetrics when asked for, gzipped when accepted (the
# encoders of prometheus_client); GET / a page naming it; other paths 404,
# other methods 405. The HTTP server (http.py) runs in one thread of its
# own, a trio task per connection, with a cap on connections and timeouts;
# the scraper (scrape.py) reads the IPUs at most once per cache interval.
# With a web configuration file (webconfig.py) it serves TLS and asks for
# basic authentication as Prometheus's exporter-toolkit does.
from __future__ import annotations

import base64
import binascii
import gzip
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trio
from prometheus_client.core import Metric as Family
from prometheus_client.exposition import choose_encoder

from ipufs.monitoring import metrics
from ipufs.monitoring.http import HttpServer, Request, Response, plain
from ipufs.monitoring.pods import PodResources
from ipufs.monitoring.scrape import Scraper
from ipufs.monitoring.webconfig import WebConfigFile

log = logging.getLogger("ipufs")
#: ipufs's own default port (9842).
DEFAULT_LISTEN = "127.0.0.1:9842"
INDEX = b"<html><body><h1>ipufs exporter</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n"
#: Descriptors the exporter holds beside its connections: the listening
#: socket, trio's epoll and wake-up pipe, a reading's node and control
#: socket, the kubelet channel, and room for the moment of an accept.
OWN_DESCRIPTORS = 16


@dataclass(frozen=True)
class Limits:
    """How much the exporter takes: connections open at once, seconds a
    request head may take to arrive (and an answer to be taken), seconds a
    reading is reused, seconds the daemon has to answer."""

    max_connections: int = 64
    request_timeout: float = 10.0
    cache: float = 1.0
    daemon_timeout: float = 2.0

    @property
    def descriptors(self) -> int:
        """The most descriptors the exporter holds at once."""
        return self.max_connections + OWN_DESCRIPTORS


def parse_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) -> (host, port); ValueError."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {listen!r} is not HOST:PORT (for example {DEFAULT_LISTEN})")
    return host.strip("[]") or "0.0.0.0", int(port)


class _Collected:
    """What prometheus_client's encoders take: something that collects."""

    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Family]:
        return iter(self.families)


class Exporter:
    """The server, bound at construction (OSError when it cannot be);
    ``start`` serves from a thread of its own, ``close`` stops it."""

    def __init__(self, root: Path, listen: str = DEFAULT_LISTEN, *, limits: Limits = Limits(),
                 web_config: Path | None = None, pods: PodResources | None = None) -> None:
        host, port = parse_listen(listen)
        self.limits = limits
        self.web = WebConfigFile(web_config) if web_config is not None else None
        self.scraper = Scraper(root, cache=limits.cache, daemon_timeout=limits.daemon_timeout, pods=pods)
        self.server = HttpServer(self.handle, tls=self._tls, max_connections=limits.max_connections,
                                 request_timeout=limits.request_timeout, write_timeout=limits.request_timeout)
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(128)
        except OSError:
            self.sock.close()
            raise
        self.thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._bcrypt = trio.CapacityLimiter(1)  # one password check at a time: bcrypt is costly on purpose

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def scheme(self) -> str:
        return "https" if self._tls() is not None else "http"

    def _tls(self) -> ssl.SSLContext | None:
        return None if self.web is None else self.web.current().tls

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            self._ready.set()
            await self.server.serve(trio.SocketListener(trio.socket.from_stdlib_socket(self.sock)))

    def serve_forever(self) -> None:
        trio.run(self._main)

    def start(self) -> None:
        self.thread = threading.Thread(target=self.serve_forever, name="ipufs-exporter", daemon=True)
        self.thread.start()
        self._ready.wait(10)

    def close(self) -> None:
        if self.thread is not None and self._token is not None and self._scope is not None:
            scope = self._scope
            try:
                self._token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass
            self.thread.join(10)
        self.sock.close()
        if self.scraper.pods is not None:
            self.scraper.pods.close()

    # --- answering ---------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        refused = await self._authenticate(request)
        if refused is not None:
            return refused
        if request.path not in ("/", "/metrics"):
            return plain(404, f"no {request.path} here: metrics are at /metrics\n")
        if request.method not in ("GET", "HEAD"):
            return plain(405, f"{request.method} is not served: use GET\n", ("Allow", "GET, HEAD"))
        if request.path == "/":
            return Response(200, INDEX, [("Content-Type", "text/html; charset=utf-8")])
        outcome = await self.scraper.outcome()
        families = self.scraper.families(outcome) + self._own()
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = encoder(_Collected(families))
        headers = [("Content-Type", content_type)]
        if "gzip" in request.headers.get("accept-encoding", ""):
            body = gzip.compress(body, compresslevel=1)
            headers.append(("Content-Encoding", "gzip"))
        return Response(200, body, headers)

    def _own(self) -> list[Family]:
        f, s = metrics.family, self.server
        return [f("ipufs_exporter_connections", [((), float(s.connections))]),
                f("ipufs_exporter_connections_dropped_total", [((r,), float(n)) for r, n in sorted(s.dropped.items())]),
                f("ipufs_exporter_requests_total", [((str(c),), float(n)) for c, n in sorted(s.answered.items())])]

    async def _authenticate(self, request: Request) -> Response | None:
        """None when the request may be served, else the 401 answer."""
        if self.web is None or not self.web.current().users:
            return None
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            sep = ""
        web = self.web
        if scheme.lower() == "basic" and sep and await trio.to_thread.run_sync(
                web.verify, user, password, limiter=self._bcrypt):
            return None
        return plain(401, "Unauthorized\n", ("WWW-Authenticate", 'Basic realm="ipufs exporter"'))
