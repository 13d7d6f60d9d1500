# The control socket of a daemon: a trio Unix socket server answering JSON
# lines with the operations of ipufs/daemon/control/operations.py. The
# socket gets the nodes' owner, group and mode, so whoever may open the
# nodes may use it; each operation is told who asks (peers.py), and those
# that change the device check that they may. Connections are bounded, whatever they are doing, and
# every wait on a client has a deadline for the whole of it (connections.py),
# so that clients can never take the file descriptors the device needs
# (pidfds at ATTACH, backing files); docs/control.md gives the limits.
from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from typing import Any

import trio

from ipufs.daemon.control.connections import Activity, Connection, Connections
from ipufs.daemon.control.peers import Peer
from ipufs.daemon.control.protocol import (
    MAX_LINE, Operation, Stream, parse, refusal, respond,
)
from ipufs.daemon.fields import Limits

log = logging.getLogger(__name__)

#: Connections served at once, whatever they are doing (live traces and
#: connections part-way through a line included). A new one past the limit
#: closes the one waited on the longest; when every one is a live trace that
#: keeps up, the new one is refused.
MAX_CONNECTIONS = 64
#: Live traces followed at once, at most. A trace waiting for the device's
#: next event waits on nobody, so it cannot be evicted; the rest of the
#: connections stay free for other clients however many traces are asked.
MAX_TRACES = MAX_CONNECTIONS // 2
#: Seconds a connection may wait for its next request before it is closed;
#: a live trace is exempt.
IDLE_TIMEOUT = 60.0
#: Seconds a whole request line may take to arrive from its first byte, a
#: whole answer to be taken, and a live trace's event to be taken.
LINE_TIMEOUT = 10.0
#: accept() errors that mean "no descriptor or memory left for now".
_STARVED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class ControlServer:
    def __init__(self, path: str, operations: list[Operation], *, limits: Limits, lock: threading.RLock,
                 uid: int, gid: int, mode: int, max_connections: int = MAX_CONNECTIONS,
                 max_traces: int = MAX_TRACES, idle_timeout: float = IDLE_TIMEOUT,
                 line_timeout: float = LINE_TIMEOUT) -> None:
        self.path = path
        self.operations = {op.name: op for op in operations}
        self.limits = limits
        self.lock = lock
        self.uid, self.gid, self.mode = uid, gid, mode
        self.idle_timeout = idle_timeout
        self.line_timeout = line_timeout
        self.served = Connections(max_connections)
        self.max_traces = max_traces
        #: Live traces followed now.
        self.traces = 0
        self._starved = False

    @property
    def max_connections(self) -> int:
        return self.served.limit

    @property
    def connections(self) -> int:
        """The connections served now."""
        return len(self.served)

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
                connection = self.served.admit()
                if connection is None:
                    with trio.move_on_after(1):
                        await stream.send_all(refusal(f"too many control connections (at most "
                                                      f"{self.max_connections}, all busy); try again later"))
                    return
                try:
                    await self._converse(stream, connection, Peer.of(stream.socket))
                finally:
                    self.served.release(connection)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            except Exception:
                log.exception("control connection failed")


    def _why_closed(self, connection: Connection) -> str:
        """What a connection whose wait was cut short is told."""
        activity = connection.activity
        if connection.evicted:
            what = "idle" if activity is Activity.IDLE else "part-way through a request"
            return f"{what} the longest of {self.max_connections} connections: connection closed"
        if activity is Activity.IDLE:
            return f"idle for {self.idle_timeout:g} s: connection closed"
        return f"request line unfinished after {self.line_timeout:g} s: connection closed"

    async def _converse(self, stream: trio.SocketStream, connection: Connection, peer: Peer) -> None:
        buffer = b""
        line_began = 0.0  # when the first byte of the line in ``buffer`` came
        while True:
            data = None
            if buffer:  # the whole line has one deadline, however it trickles in
                activity, deadline = Activity.RECEIVING, line_began + self.line_timeout
            else:
                activity, deadline = Activity.IDLE, trio.current_time() + self.idle_timeout
            with connection.waiting(activity, deadline):
                data = await stream.receive_some(MAX_LINE + 1)
            if data is None:
                with trio.move_on_after(1):
                    await stream.send_all(refusal(self._why_closed(connection)))
                return
            if not data:
                return
            if not buffer:
                line_began = trio.current_time()
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                parsed = parse(self.operations, line, self.limits)  # decoded once
                if isinstance(parsed, bytes):
                    reply = parsed
                else:
                    operation, arguments = parsed
                    if operation.stream is None:
                        with self.lock:
                            reply = respond(operation, arguments, line, peer)
                    elif self.traces < self.max_traces:
                        await self._follow(operation.stream, arguments, TraceStream(stream, connection,
                                                                                    self.line_timeout), peer)
                        return
                    else:
                        reply = refusal(f"too many live traces (at most {self.max_traces}): close one, "
                                        "or try again later")
                with connection.waiting(Activity.ANSWERING, trio.current_time() + self.line_timeout) as sending:
                    await stream.send_all(reply)
                if sending.cancelled_caught:
                    return  # a client that reads no answers is gone as far as we care
                line_began = trio.current_time()  # what follows in ``buffer`` begins the next line
            if len(buffer) > MAX_LINE:
                # No line end in sight: the rest of this line cannot be told
                # from the next request, so the connection ends here.
                with trio.move_on_after(1):
                    await stream.send_all(refusal(f"line too long: a request is at most {MAX_LINE} bytes"))
                return


    async def _follow(self, trace: Stream, arguments: dict[str, Any], stream: TraceStream, peer: Peer) -> None:
        """Hand the connection over to a live trace, counted while it lasts."""
        self.traces += 1
        try:
            await trace(arguments, stream, peer)
        finally:
            self.traces -= 1


class TraceStream:
    """The connection as a live trace sees it: sending an event that the
    client does not take within ``timeout`` (or when a newcomer evicts the
    stalled trace) fails with ``trio.BrokenResourceError``, which ends the
    trace like a client that went away."""

    def __init__(self, stream: trio.SocketStream, connection: Connection, timeout: float) -> None:
        self.stream = stream
        self.connection = connection
        self.timeout = timeout

    async def send_all(self, data: bytes) -> None:
        with self.connection.waiting(Activity.STALLED, trio.current_time() + self.timeout) as scope:
            await self.stream.send_all(data)
        if scope.cancelled_caught:
            raise trio.BrokenResourceError("the trace was not read: closed")

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.stream.receive_some(max_bytes)


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
