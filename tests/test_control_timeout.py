# After a ControlTimeout (tests/test_client_control.py) the next request
# starts on a new connection, and a daemon whose listen backlog is full
# (a Unix socket's connect then says EAGAIN at once) is waited for until the
# timeout too. A listening socket that is never served stands for the
# stopped daemon: the kernel completes a connect while the backlog has room.
from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from ipufs.client.control import Control, ControlTimeout


def test_the_request_after_a_timeout_starts_afresh(tmp_path: Path) -> None:
    path = str(tmp_path / "ctl")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(4)
        control = Control(path, timeout=0.3)
        with pytest.raises(ControlTimeout, match=rf"did not answer 'status' within 0.3 s on {path}: it is stopped"):
            control.request("status")

        def serve() -> None:  # the daemon runs again: it finds the connection given up, then the new one
            for _ in range(2):
                conn, _ = listener.accept()
                with conn, conn.makefile("rb") as lines:
                    try:
                        for line in lines:
                            conn.sendall(json.dumps({"ok": True, "op": json.loads(line)["op"]}).encode() + b"\n")
                    except BrokenPipeError:
                        pass

        threading.Thread(target=serve, daemon=True).start()
        assert control.request("status") == {"op": "status"}
        control.close()


def test_a_full_backlog_is_reported_as_a_connection_not_accepted(tmp_path: Path) -> None:
    path = str(tmp_path / "ctl")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(0)
        held = []
        try:
            for _ in range(4):  # fill the backlog (connects past it would block)
                s = socket.socket(socket.AF_UNIX)
                s.setblocking(False)
                try:
                    s.connect(path)
                except BlockingIOError:
                    s.close()
                    break
                held.append(s)
            with pytest.raises(ControlTimeout, match="did not accept the connection"):
                Control(path, timeout=0.3)
        finally:
            for s in held:
                s.close()
