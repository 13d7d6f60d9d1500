# The benchmark harness works end to end (seconds; no timing is checked).
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.mount
@pytest.mark.alone  # its io_uring rows set enable_uring
@pytest.mark.timeout(300)
def test_benchmark_smoke_run_produces_every_figure() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke"],
                         capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr
    # Each request path is measured, or a row says why it cannot be here.
    for variant in ("classic (", "fast path (", "io_uring ("):
        assert f"client unpinned, p50 / p99 — {variant}" in out.stdout or \
            f"ipufs request path — {variant}" in out.stdout, variant
    assert "client unpinned, p50 / p99 — classic (" in out.stdout
    assert "not built (install libfuse3-dev)" in out.stdout or "C, cloned threads" in out.stdout
    for figure in ("ioctl round trip", "client pinned", "sustained ioctls/s, 64 clients", "server CPU per ioctl",
                   "against the bare Python loop", "mapped store CMD_SYNC", "memcpy into the ipu0_ex mapping",
                   "ipu0_mem pwrite+pread", "mount 64 × ipu2", "through the compatibility library",
                   "a tmpfs file the library must check",
                   "ISA: word decoder", "ISA: `ipufs disasm --raw`", "Executor: one tile",
                   "Executor: RESET ioctl", "Executor: a reset of an ipu2 in process",
                   "Executor: the naive C interpreter", "Executor through the daemon: one tile of an ipu2",
                   "Executor through the daemon: every tile", "wait at `sync 3`", "reads CTXT_STS of every tile",
                   "server pinned to CPU 1, clients to CPU 0: sustained ioctls/s, 8 clients — fast path (",
                   "server pinned to CPU 1, clients to CPU 0: ioctl round trip"):
        assert figure in out.stdout


@pytest.mark.mount
@pytest.mark.timeout(300)
def test_page_cache_benchmark_smoke_run_produces_every_figure() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "page_cache.py"), "--smoke"],
                         capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr
    for figure in ("ioctl round trip", "pwrite CMD_SYNC", "mapped store CMD_SYNC", "daemon CPU"):
        assert figure in out.stdout
