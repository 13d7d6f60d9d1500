# The exporter's HTTP/1.1 server: one trio task per connection in one
# thread (no thread per connection), at most `max_connections` open at once
# (past that, new connections wait in the kernel's listen queue and hold no
# descriptor of ours), a request head that must arrive whole within
# `request_timeout` (else the connection is dropped: a client that connects
# and says nothing, or sends its headers a byte at a time, holds a slot
# that long at most), an answer that must be taken within `write_timeout`,
# keep-alive between scrapes, and TLS when a context is given. Out of
# descriptors, it pauses accepting instead of spinning. It serves GET and
# HEAD; a request with a body is answered and the connection closed.
from __future__ import annotations

import errno
import logging
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

log = logging.getLogger("ipufs")
#: The longest request head taken (request line and headers); longer: 431.
MAX_HEAD = 64 * 1024
#: accept() errors that mean "out of descriptors or memory": wait, then go on.
_SCARCE = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]  # names in lower case


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    close: bool = False  # end the connection after this answer

    def encode(self, head_only: bool, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}",
                 *(f"{k}: {v}" for k, v in self.headers), f"Content-Length: {len(self.body)}",
                 f"Connection: {'keep-alive' if keep_alive else 'close'}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else self.body)


def plain(status: int, text: str, *headers: tuple[str, str]) -> Response:
    return Response(status, text.encode(), [("Content-Type", "text/plain; charset=utf-8"), *headers])


Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(ValueError):
    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


def parse_head(head: bytes) -> Request:
    """A request head (without its blank line) -> Request; BadRequest."""
    try:
        text = head.decode("latin-1")
        line, *header_lines = text.split("\r\n")
        method, path, version = line.split(" ")
    except ValueError:
        raise BadRequest(400, "not an HTTP request line") from None
    if not version.startswith("HTTP/1.") or not method.isalpha() or not path:
        raise BadRequest(400, f"not an HTTP/1.x request: {line[:80]!r}")
    headers: dict[str, str] = {}
    for h in header_lines:
        name, sep, value = h.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line {h[:80]!r}")
        headers[name.lower()] = value.strip()
    return Request(method, path.split("?", 1)[0], version, headers)


class HttpServer:
    """Serves ``handler`` on a bound, listening socket until cancelled.
    ``tls`` returns the TLS context in force (None: plain HTTP), asked at
    each connection so that a changed certificate applies to the next."""

    def __init__(self, handler: Handler, *, tls: Callable[[], ssl.SSLContext | None] = lambda: None,
                 max_connections: int = 64, request_timeout: float = 10.0, write_timeout: float = 10.0) -> None:
        self.handler = handler
        self.tls = tls
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.write_timeout = write_timeout
        self.connections = 0
        self.dropped: Counter[str] = Counter()
        self.answered: Counter[int] = Counter()

    async def serve(self, listener: trio.SocketListener) -> None:
        """Accept and answer until cancelled; the listener is closed then."""
        async with listener:
            await self._accept(listener)

    async def _accept(self, listener: trio.SocketListener) -> None:
        slots = trio.Semaphore(self.max_connections)
        async with trio.open_nursery() as nursery:
            while True:
                await slots.acquire()
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    slots.release()
                    if exc.errno not in _SCARCE:
                        raise
                    log.warning("exporter: cannot accept a connection (%s): pausing 0.1 s", exc.strerror)
                    await trio.sleep(0.1)
                    continue
                nursery.start_soon(self._connection, stream, slots)

    async def _connection(self, stream: trio.SocketStream, slots: trio.Semaphore) -> None:
        self.connections += 1
        try:
            await self._converse(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away
        finally:
            self.connections -= 1
            await trio.aclose_forcefully(stream)
            slots.release()

    async def _converse(self, raw: trio.SocketStream) -> None:
        stream: trio.abc.Stream = raw
        context = self.tls()
        if context is not None:
            tls = trio.SSLStream(raw, context, server_side=True, https_compatible=True)
            with trio.move_on_after(self.request_timeout) as scope:
                try:
                    await tls.do_handshake()
                except trio.BrokenResourceError:
                    self.dropped["tls"] += 1
                    return
            if scope.cancelled_caught:
                self.dropped["timeout"] += 1
                return
            stream = tls
        buffer = bytearray()
        while True:
            head: bytes | None = None
            with trio.move_on_after(self.request_timeout):
                head = await self._head(stream, buffer)
            if head is None:  # timed out: a slow client if it had begun a request, else an idle one
                if buffer:
                    self.dropped["timeout"] += 1
                return
            if head == b"":
                return  # closed between requests
            keep = await self._answer(stream, head, buffer)
            if not keep:
                return

    async def _head(self, stream: trio.abc.Stream, buffer: bytearray) -> bytes:
        """The next request head, b"" when the client closed before one;
        raises BadRequest(431) for one too long."""
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(buffer[:end])
                del buffer[:end + 4]
                return head
            if len(buffer) > MAX_HEAD:
                return bytes(buffer)  # _answer refuses it
            chunk = await stream.receive_some(65536)
            if not chunk:
                if buffer:
                    raise trio.BrokenResourceError("the client closed mid-request")
                return b""
            buffer += chunk

    async def _answer(self, stream: trio.abc.Stream, head: bytes, buffer: bytearray) -> bool:
        """Answer one request; whether the connection stays open."""
        request: Request | None = None
        try:
            if len(head) > MAX_HEAD:
                raise BadRequest(431, f"a request head over {MAX_HEAD} bytes")
            request = parse_head(head)
        except BadRequest as exc:
            response = plain(exc.status, f"{exc}\n")
            response.close = True
        else:
            try:
                response = await self.handler(request)
            except Exception as exc:  # one failed answer: say so, keep serving
                log.warning("exporter: answering %s %s failed: %s", request.method, request.path, exc, exc_info=exc)
                response = plain(500, f"the answer failed: {exc}\n")
        self.answered[response.status] += 1
        has_body = request is not None and (request.headers.get("content-length", "0") not in ("", "0")
                                            or "transfer-encoding" in request.headers)
        keep = (request is not None and not response.close and not has_body
                and request.headers.get("connection", "").lower() != "close"
                and (request.version == "HTTP/1.1" or request.headers.get("connection", "").lower() == "keep-alive"))
        data = response.encode(request is not None and request.method == "HEAD", keep)
        with trio.move_on_after(self.write_timeout) as scope:
            await stream.send_all(data)
        if scope.cancelled_caught:
            self.dropped["timeout"] += 1
            return False
        return keep
