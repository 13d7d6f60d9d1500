# What a crowd of clients can take from the exporters: the daemon's own
# (`ipufs mount --exporter`) keeps the descriptors its IPUs need and starts
# no thread per connection; `ipufs exporter` drops clients that do not send
# a whole request in time, does not spin at its descriptor limit, and reads
# the IPUs once for any number of scrapes within its cache interval.
from __future__ import annotations

import errno
import os
import resource
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.harness import RunningDaemon, daemon_process, stop_processes, wait_for
from tests.monitoring.conftest import ExporterProcess
from tests.monitoring.test_exporter import scrape

pytestmark = pytest.mark.mount


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _open_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` TCP connections that say nothing, opened without waiting
    (those past the listen queue stay half-open)."""
    out = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex(("127.0.0.1", port))
        assert err in (0, errno.EINPROGRESS), os.strerror(err)
        out.append(s)
    return out


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _settle(pid: int, timeout: float = 15.0) -> None:
    """Wait until ``pid``'s open descriptors stay the same for a second."""
    deadline, last, since = time.monotonic() + timeout, -1, time.monotonic()
    while time.monotonic() < deadline:
        now = len(os.listdir(f"/proc/{pid}/fd"))
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 1.0:
            return
        time.sleep(0.1)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.timeout(120)
def test_idle_connections_leave_the_daemon_its_descriptors(tmp_path: Path) -> None:
    """300 idle connections to the daemon's exporter, with the daemon's
    limit on open files at 256: the IPU still opens, the daemon has no
    thread per connection, and once the idle ones are dropped the
    exporter answers again."""
    port = _free_port()
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    daemon = daemon_process(mountpoint, "--ipus", "1", "--no-link-dev", "--exporter", f"127.0.0.1:{port}")
    idle: list[socket.socket] = []
    try:
        resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE, (256, 256))
        threads_before = _threads(daemon.pid)
        idle = _open_idle(port, 300)
        _settle(daemon.pid)  # it accepted what it will
        fd = os.open(mountpoint / "ipu0", os.O_RDONLY)  # EIO when the daemon is out of descriptors
        try:
            assert len(os.pread(fd, 64, 0)) == 64
        finally:
            os.close(fd)
        assert len(os.listdir(f"/proc/{daemon.pid}/fd")) < 256
        assert _threads(daemon.pid) <= threads_before + 2  # one server thread, not one per connection
        for s in idle:  # the clients leave: the slots come free at once
            s.close()
        idle = []
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            assert b"ipufs_up 1.0" in r.read()
    finally:
        for s in idle:
            s.close()
        stop_processes(mountpoint, daemon)


@pytest.mark.timeout(120)
def test_slow_clients_are_dropped_and_others_are_served(board: RunningDaemon) -> None:
    e = ExporterProcess(board.mountpoint, "--request-timeout", "1", "--max-connections", "8")
    slow = []
    try:
        for _ in range(20):  # more than it takes at once: the rest wait in the listen queue
            s = socket.create_connection(("127.0.0.1", e.port), timeout=30)
            slow.append(s)
        for s in slow[:8]:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # ...and never the blank line
        began = time.monotonic()
        for s in slow:  # each is closed by the exporter within its second
            assert s.recv(4096) == b""
        assert time.monotonic() - began < 20
        samples = scrape(e)
        dropped = samples[("ipufs_exporter_connections_dropped_total", frozenset({("reason", "timeout")}))]
        assert dropped == 8  # the 12 that never sent a byte were idle, not slow
        assert samples[("ipufs_up", frozenset())] == 1
    finally:
        for s in slow:
            s.close()
        e.close()


@pytest.mark.timeout(120)
def test_at_its_descriptor_limit_it_waits_instead_of_spinning(board: RunningDaemon) -> None:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    e = ExporterProcess(board.mountpoint, "--max-connections", "500", "--request-timeout", "30",
                        preexec_fn=low_limit)
    idle: list[socket.socket] = []
    try:
        idle = _open_idle(e.port, 100)
        time.sleep(1.0)
        before = _cpu_seconds(e.proc.pid)
        time.sleep(2.0)
        assert _cpu_seconds(e.proc.pid) - before < 0.5  # a spinning accept loop takes the whole 2 s
        for s in idle:
            s.close()
        idle = []
        assert wait_for(lambda: scrape(e)[("ipufs_up", frozenset())] == 1, 30)
    finally:
        for s in idle:
            s.close()
        e.close()


def test_scrapes_within_the_cache_interval_share_one_reading(board: RunningDaemon) -> None:
    e = ExporterProcess(board.mountpoint, "--cache", "30")
    try:
        answers: list[bytes] = []

        def one() -> None:
            with urllib.request.urlopen(e.url + "/metrics", timeout=30) as r:
                answers.append(r.read())

        crowd = [threading.Thread(target=one) for _ in range(16)]
        for t in crowd:
            t.start()
        for t in crowd:
            t.join(60)
        assert len(answers) == 16
        samples = scrape(e)
        assert samples[("ipufs_exporter_scrapes_total", frozenset())] == 1
        assert samples[("ipufs_exporter_cached_answers_total", frozenset())] == 16
    finally:
        e.close()
