# `ipufs exporter`: an HTTP server for Prometheus (docs/monitoring.md).
# GET /metrics answers the IPUs' metrics in the Prometheus text format (or
# OpenMetrics, when asked for) through prometheus_client's own WSGI app;
# GET / a short page naming it. Anything else gets the HTTP status that
# says why (404, 405) and the server keeps serving: every request runs in
# its own thread, and a scrape that fails answers 500 for that scrape only.
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from ipufs.monitoring.metrics import IpuCollector

log = logging.getLogger("ipufs")
#: ipufs's own default port (9842).
DEFAULT_LISTEN = "127.0.0.1:9842"
INDEX = b"<html><body><h1>ipufs exporter</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n"

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        log.debug("exporter: " + format, *args)


def application(root: Path) -> Callable[[Environ, StartResponse], Iterable[bytes]]:
    """The WSGI app serving the IPUs under ``root``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(IpuCollector(root))
    metrics = make_wsgi_app(registry)

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path not in ("/", "/metrics"):
            return _plain(start_response, "404 Not Found", f"no {path} here: metrics are at /metrics\n")
        if method not in ("GET", "HEAD"):
            return _plain(start_response, "405 Method Not Allowed", f"{method} is not served: use GET\n",
                          [("Allow", "GET, HEAD")])
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [INDEX]
        try:
            return list(metrics(environ, start_response))
        except Exception as exc:  # one failed scrape: say so, keep serving
            log.warning("exporter: a scrape failed: %s", exc, exc_info=exc)
            return _plain(start_response, "500 Internal Server Error", f"the scrape failed: {exc}\n")

    return app


def _plain(start_response: StartResponse, status: str, text: str,
           headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), *(headers or [])])
    return [text.encode()]


def parse_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) -> (host, port); ValueError."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {listen!r} is not HOST:PORT (for example {DEFAULT_LISTEN})")
    return host.strip("[]") or "0.0.0.0", int(port)


class Exporter:
    """The server, bound at construction; ``serve_forever`` or ``start``
    a thread; ``close`` stops it."""

    def __init__(self, root: Path, listen: str = DEFAULT_LISTEN) -> None:
        host, port = parse_listen(listen)
        server_class: type[WSGIServer] = _Server
        if ":" in host:
            import socket

            server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        self.server = make_server(host, port, application(root), server_class=server_class,
                                  handler_class=_Quiet)
        self.thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def start(self) -> None:
        self.thread = threading.Thread(target=self.serve_forever, name="ipufs-exporter", daemon=True)
        self.thread.start()

    def close(self) -> None:
        if self.thread is not None:
            self.server.shutdown()
            self.thread.join()
        self.server.server_close()
