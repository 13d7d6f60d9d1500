# Talking to a daemon's control socket (docs/control.md). The socket of a
# mount is named in its root's user.ipufs.control attribute.
from __future__ import annotations

import errno
import json
import os
import select
import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ipufs.client.where import default_control


class ControlError(RuntimeError):
    """The daemon refused a request; the message is its explanation."""


class ControlTimeout(ControlError):
    """The daemon did not answer within the connection's timeout: it is
    stopped (SIGSTOP, a debugger) or too busy to serve its control socket."""


def control_path(mountpoint: str | os.PathLike[str]) -> str:
    """The control socket of the mount at ``mountpoint`` (its root's
    user.ipufs.control). A directory that is no ipufs mount (inside
    `ipufs run`, /dev holds the nodes themselves) names the socket of
    $IPUFS_CONTROL when that is set; else the OSError (ENODATA) stands."""
    try:
        return os.getxattr(mountpoint, "user.ipufs.control").decode()
    except OSError as exc:
        fallback = default_control()
        if fallback is not None and exc.errno in (errno.ENODATA, errno.ENOTSUP):
            return fallback
        raise


class Control:
    """A connection to a daemon's control socket. The daemon closes a
    connection left idle (docs/control.md); the next request then opens a
    new one by itself. Connecting and every answer wait ``timeout`` seconds
    at most (TIMEOUT unless told), then raise ControlTimeout, which says so
    in one line: a stopped daemon never leaves a tool waiting."""

    #: How long a tool waits for the daemon to accept or answer, in seconds.
    TIMEOUT = 5.0

    def __init__(self, path: str, timeout: float | None = None) -> None:
        self.path = path
        self.timeout = self.TIMEOUT if timeout is None else timeout
        self._connect()

    def _timed_out(self, doing: str) -> ControlTimeout:
        return ControlTimeout(f"the daemon did not {doing} within {self.timeout:g} s on {self.path}: it is stopped "
                              "(SIGSTOP, a debugger) or overloaded")

    def _connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.sock.connect(self.path)
                break
            except (TimeoutError, BlockingIOError):
                # A Unix socket's connect says EAGAIN at once while the
                # daemon's backlog is full: tried again until the timeout.
                if time.monotonic() >= deadline:
                    self.sock.close()
                    raise self._timed_out("accept the connection") from None
                time.sleep(0.01)
            except OSError:
                self.sock.close()
                raise
        self.file = self.sock.makefile("rb")

    @classmethod
    def of_mount(cls, mountpoint: str | os.PathLike[str], timeout: float | None = None) -> Control:
        return cls(control_path(mountpoint), timeout)

    def _closed_by_daemon(self) -> bool:
        """Whether the daemon has ended the connection (or said it would)
        while no request was waiting: nothing else makes it readable."""
        poller = select.poll()  # select() cannot watch descriptors past 1023
        poller.register(self.sock, select.POLLIN)
        return bool(poller.poll(0))

    def request(self, op: str, **arguments: Any) -> dict[str, Any]:
        """Send one request; its answer without "ok". Raises ControlError
        with the daemon's reason when it refuses."""
        if self.sock.fileno() == -1:
            self._connect()
        elif self._closed_by_daemon():
            self.close()
            self._connect()
        try:
            self.sock.sendall(json.dumps({"op": op, **arguments}).encode() + b"\n")
            line = self.file.readline()
        except TimeoutError:
            self.close()  # its answer may still come: the next request starts afresh
            raise self._timed_out(f"answer {op!r}") from None
        if not line:
            raise ControlError("the daemon closed the control connection")
        answer: dict[str, Any] = json.loads(line)
        if not answer.pop("ok", False):
            raise ControlError(answer.get("error", "refused"))
        return answer

    def inject(self, kind: str, ipu: int = 0, **parameters: Any) -> str:
        """Make the device misbehave (docs/faults.md); returns what fired."""
        return str(self.request("inject", kind=kind, ipu=ipu, **parameters)["fired"])

    def status(self) -> dict[str, Any]:
        return self.request("status")

    def trace(self, ipu: int | None = None, kinds: Iterable[str] = ()) -> Iterator[dict[str, Any]]:
        """Follow the daemon's trace (docs/faults.md): one event at a time,
        of IPU ``ipu`` (default: all) and of ``kinds`` (default: all), until
        the daemon stops. Events lost because the reader fell behind are
        counted by a ``dropped`` event; a trace not read for long is closed
        by the daemon (ControlError). The connection carries nothing else
        afterwards."""
        request: dict[str, Any] = {"kinds": list(kinds)}
        if ipu is not None:
            request["ipu"] = ipu
        self.request("trace", **request)  # raises ControlError when refused
        self.sock.settimeout(None)
        for line in self.file:
            if not line.endswith(b"\n"):  # a trace not read in time is closed mid-event
                raise ControlError("the daemon closed the trace: it was not read in time (docs/control.md)")
            event: dict[str, Any] = json.loads(line)
            yield event

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
