# The control socket of a daemon: a trio Unix socket server answering JSON
# lines with the operations of ipufs/daemon/control/operations.py. The
# socket gets the nodes' owner, group and mode, so whoever may open the
# nodes may use it. Connections are bounded and idle ones time out, so that
# clients can never take the file descriptors the device needs (pidfds at
# ATTACH, backing files); docs/control.md gives the limits.
from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from typing import Any

import trio

from ipufs.daemon.control.protocol import (
    MAX_LINE, Operation, RequestRefused, answer, decode, operation_of, refusal,
)
from ipufs.daemon.fields import Invalid, Limits

log = logging.getLogger(__name__)

#: Connections served at once (live traces included). A new one past the
#: limit closes the connection idle the longest; when every one is a live
#: trace, the new one is refused.
MAX_CONNECTIONS = 64
#: Seconds a connection may wait between requests (or take to finish a
#: line) before it is closed; a live trace is exempt.
IDLE_TIMEOUT = 60.0
#: accept() errors that mean "no descriptor or memory left for now".
_STARVED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class ControlServer:
    def __init__(self, path: str, operations: list[Operation], *, limits: Limits, lock: threading.RLock,
                 uid: int, gid: int, mode: int, max_connections: int = MAX_CONNECTIONS,
                 idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.path = path
        self.operations = {op.name: op for op in operations}
        self.limits = limits
        self.lock = lock
        self.uid, self.gid, self.mode = uid, gid, mode
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self.connections = 0
        #: The connections waiting for a request: since when, how to end the
        #: wait, and their slot flag (cleared when evicted).
        self._idle: dict[int, tuple[float, trio.CancelScope, list[bool]]] = {}
        self._starved = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        _remove_old_socket(self.path)
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        made: tuple[int, int] | None = None
        try:
            await sock.bind(self.path)
            st = os.lstat(self.path)
            made = (st.st_dev, st.st_ino)
            os.chown(self.path, self.uid, self.gid)
            os.chmod(self.path, self.mode)
            sock.listen(16)
            task_status.started()
            async with trio.open_nursery() as nursery:
                while True:
                    conn = await self._accept(sock)
                    nursery.start_soon(self._serve, trio.SocketStream(conn))
        finally:
            sock.close()
            # Only the socket this daemon made: a successor at the same
            # mount point may have replaced it with its own.
            try:
                st = os.lstat(self.path)
                if made == (st.st_dev, st.st_ino):
                    os.unlink(self.path)
            except FileNotFoundError:
                pass

    async def _accept(self, sock: trio.socket.SocketType) -> trio.socket.SocketType:
        """The next connection. Out of descriptors, the daemon says so once
        (not at every retry) and waits for some to be freed."""
        while True:
            try:
                conn, _ = await sock.accept()
            except OSError as exc:
                if exc.errno not in _STARVED:
                    raise
                if not self._starved:
                    log.warning("control socket: cannot accept connections: %s; retrying until "
                                "descriptors are freed", os.strerror(exc.errno or 0))
                    self._starved = True
                await trio.sleep(0.1)
                continue
            if self._starved:
                log.info("control socket: accepting connections again")
                self._starved = False
            return conn

    async def _serve(self, stream: trio.SocketStream) -> None:
        # Whatever a client does, it must never take the daemon down.
        async with stream:
            try:
                if self.connections >= self.max_connections and not self._evict():
                    await stream.send_all(refusal(f"too many control connections (at most "
                                                  f"{self.max_connections}, all busy); try again later"))
                    return
                self.connections += 1
                slot = [True]  # this connection holds a slot (until evicted)
                try:
                    await self._converse(stream, slot)
                finally:
                    if slot[0]:
                        self.connections -= 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            except Exception:
                log.exception("control connection failed")

    def _evict(self) -> bool:
        """End the wait of the connection idle the longest (it is told so
        and closed, and its slot taken by the newcomer at once)."""
        if not self._idle:
            return False
        key = min(self._idle, key=lambda k: self._idle[k][0])
        _, scope, slot = self._idle.pop(key)
        slot[0] = False  # its slot is the newcomer's, though it still says goodbye
        self.connections -= 1
        scope.cancel()
        return True

    def _answer(self, line: bytes) -> bytes:
        with self.lock:
            return answer(self.operations, line, self.limits)

    def _stream_of(self, line: bytes) -> tuple[Operation, dict[str, Any]] | None:
        """The streaming operation a line asks for, with its checked
        arguments; None for any other line (or a refused one)."""
        try:
            request = decode(line)
            operation = operation_of(self.operations, request)
            if operation.stream is None:
                return None
            return operation, operation.arguments(request, self.limits)
        except (RequestRefused, Invalid):
            return None

    async def _converse(self, stream: trio.SocketStream, slot: list[bool]) -> None:
        buffer = b""
        while True:
            data = None
            with trio.move_on_after(self.idle_timeout) as scope:
                if not buffer:  # a connection in mid-line is not idle
                    self._idle[id(slot)] = (trio.current_time(), scope, slot)
                data = await stream.receive_some(MAX_LINE + 1)
            self._idle.pop(id(slot), None)
            if data is None:
                reason = f"idle for {self.idle_timeout:g} s" if slot[0] else \
                    f"idle the longest of {self.max_connections} connections"
                with trio.move_on_after(1):
                    await stream.send_all(refusal(f"{reason}: connection closed"))
                return
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                streaming = self._stream_of(line)
                if streaming is not None:
                    operation, arguments = streaming
                    assert operation.stream is not None
                    await operation.stream(arguments, stream)
                    return
                with trio.move_on_after(self.idle_timeout) as sending:
                    await stream.send_all(self._answer(line))
                if sending.cancelled_caught:
                    return  # a client that reads no answers is gone as far as we care
            if len(buffer) > MAX_LINE:
                # No line end in sight: the rest of this line cannot be told
                # from the next request, so the connection ends here.
                await stream.send_all(refusal(f"line too long: a request is at most {MAX_LINE} bytes"))
                return


def _remove_old_socket(path: str) -> None:
    """Remove the socket an earlier daemon left at ``path`` (a crashed one's,
    or a hung one's that was aborted); refuse to remove anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise RuntimeError(f"control socket path {path} exists and is not a socket")
    os.unlink(path)
