# Nothing written is lost when the daemon is killed: with --state-dir, BAR
# memory lives in files, which clients write through passthrough mappings
# and pwrite; a SIGKILL of the daemon in the middle of the writes, then a
# restart on the same state directory, finds every byte (checked by
# digests) and the reset counter.
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ipufs.model.profile import PROFILES
from tests.integration.harness import daemon_process, stop_processes

pytestmark = pytest.mark.mount

WRITER = textwrap.dedent("""
    import hashlib, mmap, os, random, sys
    root = sys.argv[1]
    ex = os.open(root + "/ipu0_ex", os.O_RDWR)
    mem = os.open(root + "/ipu0_mem", os.O_RDWR)
    bar = mmap.mmap(ex, os.fstat(ex).st_size, mmap.MAP_SHARED)
    rng = random.Random(7)
    print("ready", flush=True)
    sys.stdin.readline()  # go
    written = 0
    for i in range(400):
        block = rng.randbytes(4096)
        bar[i * 4096 : (i + 1) * 4096] = block        # tile memory, through the mapping
        try:
            os.pwrite(mem, block, i * 4096)             # host memory, through pwrite
        except OSError:
            pass                                        # the daemon may be gone by now
        written += 1
        if i == 200:
            print("half", flush=True)
            sys.stdin.readline()  # the daemon is killed meanwhile
    print(hashlib.sha256(bar[: 400 * 4096]).hexdigest(), flush=True)
""")


def start(mnt: Path, state: Path) -> subprocess.Popen[str]:
    return daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--state-dir", str(state), "--no-link-dev")


def test_sigkill_while_clients_write_loses_nothing(tmp_path: Path) -> None:
    mnt, state = tmp_path / "mnt", tmp_path / "state"
    daemon = start(mnt, state)
    writer = None
    restarted = None
    try:
        reset = subprocess.run([sys.executable, "-m", "ipufs", "reset", "-d", "0", "--dev", str(mnt)],
                               capture_output=True, text=True, timeout=20)
        assert reset.returncode == 0, reset.stderr
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(mnt)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdin is not None and writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "half"
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
        writer.stdin.write("on\n")
        writer.stdin.flush()
        # The mapping is of the backing file itself: it outlives the daemon.
        digest = writer.stdout.readline().strip()
        assert writer.wait(10) == 0
        restarted = start(mnt, state)
        ex = (state / "ipu0.exchange").read_bytes()[: 400 * 4096]
        assert hashlib.sha256(ex).hexdigest() == digest
        with open(mnt / "ipu0_ex", "rb") as f:
            assert hashlib.sha256(f.read(400 * 4096)).hexdigest() == digest
        with open(mnt / "ipu0_mem", "rb") as f:
            mem = f.read(400 * 4096)
        # Every pwrite made before the kill is there (the first 201 blocks).
        assert mem[: 201 * 4096] == ex[: 201 * 4096]
        with open(mnt / "ipu0", "rb") as f:
            f.seek(0x108)  # RESET_COUNT
            assert int.from_bytes(f.read(4), "little") == 1
        assert os.path.getsize(state / "ipu0.exchange") == PROFILES["ipu1"].exchange_size
    finally:
        stop_processes(mnt, writer, daemon, restarted)
