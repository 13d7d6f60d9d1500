# The device plugin, the exporter and the gcipuinfo health check agree on
# which IPUs are fit (docs/kubernetes.md, "Metrics beside the plugin"):
# after each fault, the list kubelet gets from the real plugin process, the
# exporter's ipufs_ipu_healthy and checkHealthOfDevices() name the same IPUs.
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("grpc", reason="the device plugin needs the kubernetes extra (./dev setup installs it)")

from ipufs.monitoring import ipuinfo  # noqa: E402
from tests.deviceplugin.conftest import Plugin, kubelet, node, plugin, socket_dir  # noqa: E402,F401
from tests.deviceplugin.kubelet import TestKubelet  # noqa: E402
from tests.integration.harness import RunningDaemon, ipufs_command  # noqa: E402
from tests.monitoring.conftest import ExporterProcess  # noqa: E402
from tests.monitoring.test_exporter import scrape  # noqa: E402

pytestmark = pytest.mark.mount

FAULTS = [  # (command, its arguments), what is then unhealthy
    (("inject", "-d", "1", "link-down"), {1}),
    (("inject", "-d", "6", "exception", "--cause", "parity"), {1, 6}),
    (("inject", "-d", "3", "icu-timeout"), {1, 3, 6}),
    (("inject", "-d", "4", "parity", "--tile", "2", "--addr", "0x4c000"), {1, 3, 6}),  # a mark: not read yet
    (("inject", "-d", "1", "link-up"), {3, 6}),
    (("reset", "-d", "6"), {3}),
    (("inject", "-d", "3", "icu-recover"), set()),
]


@pytest.fixture
def node_exporter(node: RunningDaemon) -> Iterator[ExporterProcess]:
    e = ExporterProcess(node.mountpoint)
    try:
        yield e
    finally:
        e.close()


def test_plugin_exporter_and_health_check_agree(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin,
                                                node_exporter: ExporterProcess,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    plugin("--dev", str(node.mountpoint), "--poll-interval", "60")
    connection = kubelet.next_registration()
    monkeypatch.setenv(ipuinfo.DEV_ENV, str(node.mountpoint))
    info = ipuinfo.gcipuinfo()
    for command, unhealthy in [((), set())] + FAULTS:  # type: ignore[operator]
        if command:
            out = subprocess.run(ipufs_command(command[0], "--dev", str(node.mountpoint), *command[1:]),
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
        want = {f"ipu{i}": "Unhealthy" if i in unhealthy else "Healthy" for i in range(8)}
        connection.wait_list(lambda devices: devices == want)
        samples = scrape(node_exporter)
        exported = {int(dict(labels)["ipu"]) for (name, labels), v in samples.items()
                    if name == "ipufs_ipu_healthy" and v == 0}
        report = info.checkHealthOfDevices()
        checked = {int(d["id"]) for hosts in json.loads(report).get("hosts", {}).values() for d in hosts}
        assert exported == checked == unhealthy, (command, exported, checked)
