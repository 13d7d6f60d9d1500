# What an operator used to NVIDIA's DCGM exporter looks for: each IPU by
# the id the device plugin advertises, with the pod, namespace and container
# the kubelet allocated it to; an energy counter; memory, link state and
# errors; an info metric of versions and host; the attached process without
# a pid label; and the exporter's own health.
from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import PyClient, RunningDaemon, wait_for
from tests.monitoring.conftest import ExporterProcess, ipufs
from tests.monitoring.test_exporter import scrape, value

pytestmark = pytest.mark.mount
grpc = pytest.importorskip("grpc", reason="pod labels need the kubernetes extra (./dev setup installs it)")

from tests.monitoring.podresources import FakePodResources  # noqa: E402

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[FakePodResources]:
    fake = FakePodResources(tmp_path / "kubelet.sock")
    try:
        yield fake
    finally:
        fake.stop()


def _labels(samples: Samples, name: str, ipu: str) -> dict[str, str]:
    [labels] = [dict(ls) for (n, ls) in samples if n == name and ("ipu", ipu) in ls]
    return labels


def test_pods_label_the_ipus_they_hold(board: RunningDaemon, kubelet: FakePodResources) -> None:
    kubelet.pods = [("train-0", "ml", "worker", "graphcore.ai/ipu", ["ipu1", "ipu2"]),
                    ("other", "ml", "main", "nvidia.com/gpu", ["ipu3"])]  # another resource's ids are not ours
    e = ExporterProcess(board.mountpoint, "--pod-resources", str(kubelet.socket))
    try:
        s = scrape(e)
        for ipu in ("1", "2"):
            labels = _labels(s, "ipufs_ipu_healthy", ipu)
            assert (labels["device"], labels["pod"], labels["namespace"], labels["container"]) == \
                (f"ipu{ipu}", "train-0", "ml", "worker")
        assert _labels(s, "ipufs_ipu_power_watts", "3")["pod"] == ""
        assert s[("ipufs_exporter_pod_resources_up", frozenset())] == 1
        kubelet.pods = [("serve-7", "web", "api", "graphcore.ai/ipu", ["ipu3"])]  # the next pod
        s = scrape(e)
        assert _labels(s, "ipufs_ipu_healthy", "1")["pod"] == ""
        assert _labels(s, "ipufs_ipu_healthy", "3")["pod"] == "serve-7"
        kubelet.failing = True  # the kubelet does not answer: the IPUs are still served, without pods
        s = scrape(e)
        assert s[("ipufs_exporter_pod_resources_up", frozenset())] == 0 and s[("ipufs_up", frozenset())] == 1
        assert _labels(s, "ipufs_ipu_healthy", "3")["pod"] == ""
        kubelet.stop()  # and gone: not a Kubernetes node (any more), nothing said of pods
        assert ("ipufs_exporter_pod_resources_up", frozenset()) not in scrape(e)
    finally:
        e.close()


def test_the_device_label_is_what_the_plugin_advertises(board: RunningDaemon) -> None:
    from ipufs.deviceplugin.inventory import discover

    advertised = discover(board.mountpoint).ids()
    e = ExporterProcess(board.mountpoint)
    try:
        s = scrape(e)
        exported = [_labels(s, "ipufs_ipu_healthy", str(i))["device"] for i in range(4)]
        assert exported == advertised == ["ipu0", "ipu1", "ipu2", "ipu3"]
        assert len(set(exported)) == 4  # unique, where the four share their board's serial
    finally:
        e.close()


def test_energy_memory_link_and_identity(board: RunningDaemon) -> None:
    m = str(board.mountpoint)
    e = ExporterProcess(board.mountpoint)
    try:
        first = scrape(e)
        began = time.monotonic()
        time.sleep(1.0)
        ipufs("inject", "--dev", m, "link-errors", "-d", "2", "--count", "3")
        with open(board.path("ipu0_ex"), "r+b") as ex:
            ex.seek(0x40000)
            ex.write(b"x" * 8)
        s = scrape(e)
        spent = value(s, "ipufs_ipu_energy_joules_total", "1") - value(first, "ipufs_ipu_energy_joules_total", "1")
        assert 12.6 * 0.9 <= spent <= 12.6 * (time.monotonic() - began + 1)  # idle at 12.6 W
        assert value(s, "ipufs_ipu_link_correctable_errors_total", "2") == 3
        assert value(s, "ipufs_ipu_link_up", "2") == 1
        assert value(s, "ipufs_ipu_link_speed_transfers_per_second", "2") == 16e9
        assert value(s, "ipufs_ipu_link_width_lanes", "2") == 16
        assert value(s, "ipufs_ipu_memory_used_bytes", "0", memory="exchange") == 4096  # one page
        assert value(s, "ipufs_ipu_memory_total_bytes", "0", memory="host_exchange") == 64 << 20
        info = _labels(s, "ipufs_ipu_info", "0")
        assert info["hostname"] == socket.gethostname() and info["target"] == "Fabric"
        assert (info["driver_version"], info["firmware_version"], info["board_variant"]) == ("0.1.0", "2.5.9", "M2000")
        ipufs("inject", "--dev", m, "link-down", "-d", "2")
        assert value(scrape(e), "ipufs_ipu_link_up", "2") == 0
    finally:
        e.close()


def test_the_attached_process_is_one_replaced_series(board: RunningDaemon) -> None:
    e = ExporterProcess(board.mountpoint)
    try:
        seen = []
        for _ in range(2):  # two processes in turn: the series is the same one
            client = PyClient(board.mountpoint, 1)
            try:
                assert client("attach") == "ok"
                s = scrape(e)
                seen.append(_labels(s, "ipufs_ipu_process_info", "1"))
                assert value(s, "ipufs_ipu_process_id", "1") == client.proc.pid
                assert value(s, "ipufs_ipu_process_start_time_seconds", "1") == pytest.approx(time.time(), abs=120)
            finally:
                client.close()
        assert seen[0] == seen[1] and "pid" not in seen[0]
        assert wait_for(lambda: ("ipufs_ipu_process_info", frozenset(seen[0].items())) not in scrape(e), 20)
    finally:
        e.close()


def test_the_exporter_reports_on_itself(board: RunningDaemon) -> None:
    e = ExporterProcess(board.mountpoint)
    try:
        scrape(e)
        s = scrape(e)
        assert s[("ipufs_exporter_scrapes_total", frozenset())] == 2
        assert 0 < s[("ipufs_exporter_scrape_duration_seconds", frozenset())] < 10
        assert s[("ipufs_exporter_requests_total", frozenset({("code", "200")}))] == 1  # the one before
        assert s[("ipufs_exporter_connections", frozenset())] == 1
    finally:
        e.close()
