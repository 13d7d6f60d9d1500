# A tool's control connection never waits on a daemon that does not answer
# (stopped, or too busy): Control.TIMEOUT, or the timeout it was given,
# then ControlTimeout with a message that says what happened. The daemon
# here is a socket that is listened on and never answered.
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from ipufs.client import Control, ControlError, ControlTimeout


def test_a_daemon_that_does_not_answer_times_out(tmp_path: Path) -> None:
    path = str(tmp_path / "ctl")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(path)
        silent.listen(1)
        control = Control(path, timeout=0.5)
        try:
            began = time.monotonic()
            with pytest.raises(ControlTimeout, match=r"^the daemon did not answer 'status' within 0\.5 s on .*ctl: "
                                                     r"it is stopped \(SIGSTOP, a debugger\) or overloaded$"):
                control.status()
            assert time.monotonic() - began < 5
        finally:
            control.close()


def test_the_timeout_is_the_class_default_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "ctl")
    monkeypatch.setattr(Control, "TIMEOUT", 0.25)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(path)
        silent.listen(1)
        with Control(path) as control:
            assert control.timeout == 0.25
            with pytest.raises(ControlError):  # a ControlTimeout is a ControlError: callers that say why still do
                control.request("ipu", ipu=0)
