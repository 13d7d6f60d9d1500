# `ipufs exporter` over a real mount: the metrics (names, labels, values
# that match `ipufs info`), their changes after `ipufs inject`, and the
# HTTP statuses bad requests get while the server keeps serving.
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness import (PyClient, RunningDaemon, daemon_process, ipufs_command, is_mounted,
                                       running_daemon, stop_processes)
from tests.monitoring.conftest import ExporterProcess, ipufs

pytestmark = pytest.mark.mount


def scrape(e: ExporterProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(e.url + "/metrics", timeout=20) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, ipu: str, **more: str) -> float:
    found = [v for (n, labels), v in samples.items()
             if n == name and ("ipu", ipu) in labels and set(more.items()) <= labels]
    assert len(found) == 1, (name, ipu, more, found)
    return found[0]


def test_metrics_carry_what_ipufs_info_prints(board: RunningDaemon, attached: PyClient,
                                              exporter: ExporterProcess) -> None:
    s = scrape(exporter)
    labels = {k: v for (n, ls), _ in s.items() if n == "ipufs_ipu_healthy" and ("ipu", "1") in ls for k, v in ls}
    assert labels["board"] == "M2000" and labels["pci_address"] == "0000:1b:00.0"
    assert labels["device"] == "ipu1" and labels["pod"] == labels["namespace"] == labels["container"] == ""
    assert labels["serial"] == ipufs("info", "-d", "1", "--json", "--dev", str(board.mountpoint)).split(
        '"board_serial_number": "')[1].split('"')[0]
    assert s[("ipufs_ipus", frozenset())] == 4
    assert value(s, "ipufs_ipu_healthy", "1") == 1
    assert value(s, "ipufs_ipu_power_watts", "1") == pytest.approx(12.6)
    assert value(s, "ipufs_ipu_clock_hertz", "1") == 1.33e9
    assert value(s, "ipufs_ipu_temperature_celsius", "1") == 45.0
    assert value(s, "ipufs_ipu_board_power_watts", "1") == 150.0
    assert value(s, "ipufs_ipu_attached", "1") == 1 and value(s, "ipufs_ipu_attached", "0") == 0
    assert value(s, "ipufs_ipu_process_info", "1", user="root") == 1
    assert value(s, "ipufs_ipu_process_id", "1") == attached.proc.pid
    assert not [labels for (_, labels) in s if "pid" in dict(labels)]  # no series grows with every process
    # held by a process but running no tile code: idle (tests/monitoring/test_utilisation.py runs some)
    assert value(s, "ipufs_ipu_utilisation_ratio", "0") == value(s, "ipufs_ipu_utilisation_ratio", "1") == 0
    assert value(s, "ipufs_ipu_resets_total", "2") == 0
    assert value(s, "ipufs_ipu_condition", "1", condition="link_down") == 0


def test_a_scrape_reads_each_ipu_once(board: RunningDaemon, attached: PyClient,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Its registers by one pread, the ICU through one open of its nodes,
    and the daemon's view of every IPU by one control request: the
    attributes, the health verdict and the counters all come from that one
    reading."""
    from collections import Counter

    from ipufs.client import Control
    from ipufs.monitoring import metrics
    from ipufs.monitoring.scrape import read_all
    from ipufs.tools import devices

    reads: Counter[tuple[str, int]] = Counter()

    def counted(name: str, read: Any) -> Any:
        def wrapper(root: Path, *rest: Any) -> Any:
            reads[name, rest[0]] += 1
            return read(root, *rest)
        return wrapper

    for name in ("registers", "icu"):
        monkeypatch.setattr(devices, name, counted(name, getattr(devices, name)))
    request = Control.request

    def asked(self: Control, op: str, **arguments: Any) -> dict[str, Any]:
        reads[op, -1] += 1
        return request(self, op, **arguments)

    monkeypatch.setattr(Control, "request", asked)
    outcome = read_all(board.mountpoint, None, 5.0)
    assert outcome.up and reads == {("status", -1): 1,
                                    **{(name, ipu): 1 for name in ("registers", "icu") for ipu in range(4)}}
    families = {f.name: f for f in metrics.ipu_families(outcome.readings)}
    assert [s.value for s in families["ipufs_ipu_attached"].samples] == [0, 1, 0, 0]
    assert [s.value for s in families["ipufs_ipu_healthy"].samples] == [1, 1, 1, 1]
    assert [s.value for s in families["ipufs_ipu_board_power_watts"].samples] == [150.0] * 4


def test_injected_faults_show(board: RunningDaemon, attached: PyClient, exporter: ExporterProcess) -> None:
    m = str(board.mountpoint)
    before = scrape(exporter)
    ipufs("inject", "--dev", m, "link-down", "-d", "1")
    ipufs("inject", "--dev", m, "parity", "-d", "2", "--tile", "3", "--addr", "0x4c010")
    ipufs("inject", "--dev", m, "reset", "-d", "3")
    ipufs("inject", "--dev", m, "telemetry", "-d", "0", "--temperature", "88", "--clock", "665")
    s = scrape(exporter)
    assert value(s, "ipufs_ipu_healthy", "1") == 0
    assert value(s, "ipufs_ipu_condition", "1", condition="link_down") == 1
    assert value(s, "ipufs_ipu_condition", "1", condition="exception_held") == 1
    assert value(s, "ipufs_ipu_exceptions_total", "1") == 1
    sent = "ipufs_ipu_signals_sent_total"
    assert value(s, sent, "1", signal="PCIE_IPU_EXCEPTION_SIG") == \
        value(before, sent, "1", signal="PCIE_IPU_EXCEPTION_SIG") + 1
    assert value(s, "ipufs_ipu_parity_errors", "2") == 1
    assert value(s, "ipufs_ipu_resets_total", "3") == 1
    assert value(s, "ipufs_ipu_temperature_celsius", "0") == 88.0
    assert value(s, "ipufs_ipu_clock_hertz", "0") == 665e6
    assert value(s, "ipufs_ipu_power_watts", "0") == pytest.approx(10.3)
    assert value(s, "ipufs_ipu_healthy", "0") == 1


def _status(url: str, method: str = "GET") -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None),
                                    timeout=20) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_bad_requests_get_their_status_and_it_keeps_serving(exporter: ExporterProcess) -> None:
    assert _status(exporter.url + "/nothing") == 404
    assert _status(exporter.url + "/metrics", "POST") == 405
    assert _status(exporter.url + "/metrics", "DELETE") == 405
    with socket.create_connection(("127.0.0.1", exporter.port), timeout=10) as sock:
        sock.sendall(b"\x00\xffnot http at all\r\n\r\n")
        assert _all(sock).startswith(b"HTTP/1.1 400 Bad Request\r\n")
    with socket.create_connection(("127.0.0.1", exporter.port), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n")
        assert _all(sock).startswith(b"HTTP/1.1 431")
    with socket.create_connection(("127.0.0.1", exporter.port), timeout=10):
        pass  # a client that connects and leaves
    assert _status(exporter.url + "/") == 200
    assert ("ipufs_ipus", frozenset()) in scrape(exporter)


def test_a_gone_mount_leaves_the_exporter_serving(tmp_path: Path) -> None:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu2") as d:
        e = ExporterProcess(d.mountpoint)
    try:
        # the mount is gone: no IPUs, an answer all the same
        samples = scrape(e)
        assert samples[("ipufs_ipus", frozenset())] == 0 and samples[("ipufs_up", frozenset())] == 0
        assert e.proc.poll() is None
    finally:
        e.close()


UNIT = Path(__file__).resolve().parents[2] / "systemd" / "ipufs-exporter.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_unit_file_is_valid(tmp_path: Path) -> None:
    exe = shutil.which("ipufs") or str(Path(sys.executable).with_name("ipufs"))
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/ipufs", exe))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not [line for line in out.stderr.splitlines() if UNIT.name in line], out.stderr


def test_it_tells_systemd_when_it_serves(board: RunningDaemon, tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(tmp_path / "notify"))
        notify.settimeout(20)
        proc = subprocess.Popen(ipufs_command("exporter", "--dev", str(board.mountpoint), "--listen", "127.0.0.1:0"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, NOTIFY_SOCKET=str(tmp_path / "notify")))
        try:
            assert notify.recv(4096).startswith(b"READY=1\nSTATUS=serving on 127.0.0.1:")
            proc.terminate()
            assert proc.wait(10) == 0
            assert notify.recv(4096) == b"STOPPING=1"
        finally:
            proc.kill()
            proc.communicate()


def test_a_listen_address_in_use_is_one_line(exporter: ExporterProcess) -> None:
    out = subprocess.run(ipufs_command("exporter", "--listen", f"127.0.0.1:{exporter.port}"),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr


def test_the_daemon_serves_metrics_itself(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    daemon = daemon_process(mountpoint, "--ipus", "2", "--no-link-dev", "--exporter", f"127.0.0.1:{port}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as r:
            text = r.read().decode()
        assert "ipufs_ipus 2.0" in text and "ipufs_up 1.0" in text
        assert 'ipufs_ipu_healthy{board="M2000",container="",device="ipu1",ipu="1"' in text
        daemon.terminate()
        assert daemon.wait(15) == 0
        with pytest.raises(OSError):  # it stopped with the daemon
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        stop_processes(mountpoint, daemon)


def test_a_busy_exporter_address_stops_the_daemon_before_it_mounts(exporter: ExporterProcess, tmp_path: Path) -> None:
    out = subprocess.run(ipufs_command("mount", str(tmp_path), "--no-link-dev", "--no-cdi",
                                       "--exporter", f"127.0.0.1:{exporter.port}"),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and out.stderr.startswith(f"ipufs mount: cannot listen on 127.0.0.1:{exporter.port}")
    assert not is_mounted(tmp_path)


@pytest.mark.timeout(120)
def test_the_scrape_benchmark_runs() -> None:
    out = subprocess.run([sys.executable, str(UNIT.parents[1] / "benchmarks" / "scrape.py"), "--smoke"],
                         capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("scrape of 2 × ipu2: p50 ")


def test_a_failed_answer_is_a_500_and_it_keeps_serving(tmp_path: Path) -> None:
    import trio

    from ipufs.monitoring.http import HttpServer, Request, Response

    async def handler(request: Request) -> Response:
        if request.path == "/boom":
            raise RuntimeError("a bug")
        return Response(200, b"fine")

    async def main() -> list[bytes]:
        server = HttpServer(handler, request_timeout=5)
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        answers = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve, listeners[0])
            for path in ("/boom", "/ok"):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(f"GET {path} HTTP/1.0\r\n\r\n".encode())
                data = b""
                while chunk := await stream.receive_some():
                    data += chunk
                answers.append(data)
                await stream.aclose()
            nursery.cancel_scope.cancel()
        return answers

    boom, ok = trio.run(main)
    assert boom.startswith(b"HTTP/1.1 500 ") and b"the answer failed: a bug" in boom
    assert ok.startswith(b"HTTP/1.1 200 ") and ok.endswith(b"fine")
