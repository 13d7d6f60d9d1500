"""The client's signal receiver: what it leaves behind when it closes."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import os, signal, sys, time
    from ipufs.client.signals import SignalReceiver
    receiver = SignalReceiver(restore_mask=sys.argv[1] == "restore")
    os.kill(os.getpid(), 44)  # queued while blocked, as the daemon's signal for a second tile's exception
    receiver.close()
    if sys.argv[1] == "keep":
        os.kill(os.getpid(), 45)  # one sent before the daemon saw the detach
        time.sleep(0.05)
    print("alive", flush=True)
""")


@pytest.mark.parametrize("mode", ["restore", "keep"])
def test_a_signal_queued_or_late_at_close_does_not_end_the_process(mode: str) -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "alive\n"), done.stderr
