# A real Prometheus server (Debian's `prometheus` package, which `./dev
# test` installs) scrapes `ipufs exporter`; the series are read back
# through Prometheus's own HTTP query API, including the change an
# `ipufs inject` makes. Everything listens on loopback only.
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import PyClient, RunningDaemon
from tests.monitoring.conftest import ExporterProcess, ipufs

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(shutil.which("prometheus") is None,
                                 reason="prometheus is not installed (Debian package `prometheus`; ./dev test installs it)")]
DEADLINE = 60.0  # seconds a series may take to show in Prometheus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, base: Path, target_port: int) -> None:
        base.mkdir()
        config = base / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: ipufs\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
        self.port = _free_port()
        self.log = open(base / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={base / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=base)

    def query(self, promql: str) -> list[dict[str, object]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.load(r)
        assert answer["status"] == "success", answer
        result: list[dict[str, object]] = answer["data"]["result"]
        return result

    def wait_for(self, promql: str, value: float) -> dict[str, object]:
        """The one series ``promql`` selects, once its value is ``value``."""
        deadline, last = time.monotonic() + DEADLINE, None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited: {(Path(self.log.name)).read_text()}")
            try:
                last = self.query(promql)
            except OSError:
                last = None  # not serving yet
            if last and len(last) == 1 and float(last[0]["value"][1]) == value:  # type: ignore[index]
                return last[0]
            time.sleep(0.2)
        raise AssertionError(f"{promql} never became {value}: last {last}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def prometheus(exporter: ExporterProcess, tmp_path: Path) -> Iterator[Prometheus]:
    p = Prometheus(tmp_path / "prometheus", exporter.port)
    try:
        yield p
    finally:
        p.close()


def test_prometheus_scrapes_the_exporter_and_sees_an_injected_fault(
        board: RunningDaemon, prometheus: Prometheus) -> None:
    series = prometheus.wait_for('ipufs_ipu_healthy{job="ipufs",ipu="2"}', 1)
    labels = dict(series["metric"])  # type: ignore[call-overload]
    assert labels.pop("instance").startswith("127.0.0.1:")
    assert labels == {"__name__": "ipufs_ipu_healthy", "job": "ipufs", "ipu": "2", "device": "ipu2",
                      "board": "M2000", "serial": "0001.0002.000000", "pci_address": "0000:1c:00.0"}
    prometheus.wait_for('ipufs_ipu_power_watts{ipu="2"}', 12.6)
    prometheus.wait_for('ipufs_ipu_clock_hertz{ipu="2"}', 1.33e9)
    prometheus.wait_for("sum(ipufs_ipu_healthy)", 4)
    prometheus.wait_for('up{job="ipufs"}', 1)

    ipufs("inject", "--dev", str(board.mountpoint), "link-down", "-d", "2")
    prometheus.wait_for('ipufs_ipu_healthy{ipu="2"}', 0)
    prometheus.wait_for('ipufs_ipu_condition{ipu="2",condition="link_down"}', 1)
    prometheus.wait_for("sum(ipufs_ipu_healthy)", 3)
    ipufs("inject", "--dev", str(board.mountpoint), "reset", "-d", "1")
    prometheus.wait_for('ipufs_ipu_resets_total{ipu="1"}', 1)
    prometheus.wait_for('changes(ipufs_ipu_resets_total{ipu="1"}[5m])', 1)  # stored as a change over time
    ipufs("inject", "--dev", str(board.mountpoint), "telemetry", "-d", "3", "--temperature", "91")
    prometheus.wait_for('max(ipufs_ipu_temperature_celsius)', 91)


def test_the_grafana_dashboard_queries_answer(board: RunningDaemon, attached: PyClient, prometheus: Prometheus) -> None:
    """Every query of docs/grafana-ipufs.json, run by Prometheus on what it
    scraped: each is valid PromQL, and those about the IPUs find them."""
    from tests.monitoring.test_metric_table import _expressions

    prometheus.wait_for("count(ipufs_ipu_info)", 4)
    prometheus.wait_for("count(ipufs_ipu_process_info)", 1)
    prometheus.wait_for('count(ipufs_ipu_energy_joules_total offset 5s)', 4)  # two scrapes at least
    empty = []
    for expr in _expressions():
        concrete = expr.replace("$instance", ".*").replace("$device", ".*")
        if not prometheus.query(concrete):
            empty.append(expr)
    # only what needs pods, faults or exporter errors, none of which this mount has
    unexpected = [e for e in empty if not ('pod!=""' in e or "== 1" in e or "errors_total" in e or "dropped" in e)]
    assert not unexpected, "\n".join(unexpected)
