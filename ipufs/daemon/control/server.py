# The control socket of a daemon: a trio Unix socket server answering JSON
# lines with the handlers of ipufs/daemon/control/operations.py. The socket gets the
# nodes' owner, group and mode, so whoever may open the nodes may use it.
from __future__ import annotations

import logging
import os

import trio

from collections.abc import Awaitable, Callable
from typing import Any

from ipufs.daemon.control.protocol import MAX_LINE, ControlError, Handler, answer, decode

#: An operation that takes the connection over (a live trace): it gets the
#: request and the stream, and returns when the client goes away.
Stream = Callable[[dict[str, Any], trio.SocketStream], Awaitable[None]]

log = logging.getLogger(__name__)


class ControlServer:
    def __init__(self, path: str, handlers: dict[str, Handler], *, uid: int, gid: int, mode: int,
                 streams: dict[str, Stream] | None = None) -> None:
        self.path = path
        self.handlers = handlers
        self.streams = streams or {}
        self.uid, self.gid, self.mode = uid, gid, mode

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            os.unlink(self.path)  # a socket left by a crashed daemon
        except FileNotFoundError:
            pass
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        try:
            await sock.bind(self.path)
            os.chown(self.path, self.uid, self.gid)
            os.chmod(self.path, self.mode)
            sock.listen(16)
            listener = trio.SocketListener(sock)
            task_status.started()
            await trio.serve_listeners(self._serve, [listener])
        finally:
            sock.close()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def _stream_of(self, line: bytes) -> tuple[dict[str, Any], Stream] | None:
        try:
            request = decode(line)
        except ControlError:
            return None
        op = request.get("op")
        run = self.streams.get(op) if isinstance(op, str) else None
        return None if run is None else (request, run)

    async def _serve(self, stream: trio.SocketStream) -> None:
        # Whatever a client does, it must never take the daemon down.
        try:
            await self._converse(stream)
        except Exception:
            log.exception("control connection failed")

    async def _converse(self, stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            try:
                while True:
                    data = await stream.receive_some(MAX_LINE)
                    if not data:
                        return
                    buffer += data
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        streaming = self._stream_of(line)
                        if streaming is not None:
                            request, run = streaming
                            await run(request, stream)
                            return
                        await stream.send_all(answer(self.handlers, line))
                    if len(buffer) > MAX_LINE:
                        await stream.send_all(answer({}, b"line too long"))
                        return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
