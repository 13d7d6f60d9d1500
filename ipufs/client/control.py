# Talking to a daemon's control socket (docs/control.md). The socket of a
# mount is named in its root's user.ipufs.control attribute.
from __future__ import annotations

import json
import os
import socket
from typing import Any


class ControlError(RuntimeError):
    """The daemon refused a request; the message is its explanation."""


def control_path(mountpoint: str | os.PathLike[str]) -> str:
    return os.getxattr(mountpoint, "user.ipufs.control").decode()


class Control:
    def __init__(self, path: str, timeout: float = 5.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    @classmethod
    def of_mount(cls, mountpoint: str | os.PathLike[str], timeout: float = 5.0) -> Control:
        return cls(control_path(mountpoint), timeout)

    def request(self, op: str, **arguments: Any) -> dict[str, Any]:
        self.sock.sendall(json.dumps({"op": op, **arguments}).encode() + b"\n")
        line = self.file.readline()
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

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
