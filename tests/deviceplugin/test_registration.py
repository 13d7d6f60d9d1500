# Registration with kubelet, over real gRPC on real Unix sockets: the
# plugin registers, lists the node's IPUs with their NUMA node, and
# registers again when kubelet restarts (and removes the plugin's socket).
from __future__ import annotations

import pytest

from tests.deviceplugin.conftest import Plugin
from tests.deviceplugin.kubelet import TestKubelet
from tests.integration.harness import RunningDaemon

pytestmark = pytest.mark.mount

ALL_HEALTHY = {f"ipu{i}": "Healthy" for i in range(8)}


def test_registers_and_lists_every_ipu(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin) -> None:
    plugin("--dev", str(node.mountpoint))
    connection = kubelet.next_registration()
    assert connection.resource_name == "graphcore.ai/ipu"
    assert connection.endpoint == "ipufs-graphcore.ai_ipu.sock"
    assert connection.options.get_preferred_allocation_available and not connection.options.pre_start_required
    assert connection.wait_list(lambda devices: devices == ALL_HEALTHY) == ALL_HEALTHY
    assert connection.topology == {f"ipu{i}": [0] for i in range(8)}


def test_registers_again_when_kubelet_restarts(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin) -> None:
    plugin("--dev", str(node.mountpoint), "--resource-name", "example.com/fake-ipu")
    first = kubelet.next_registration()
    first.wait_list(lambda devices: devices == ALL_HEALTHY)
    kubelet.restart()  # removes every socket in the directory, the plugin's too
    assert first.ended.wait(5)
    second = kubelet.next_registration()
    assert (second.resource_name, second.endpoint) == ("example.com/fake-ipu", "ipufs-example.com_fake-ipu.sock")
    assert second.wait_list(lambda devices: devices == ALL_HEALTHY) == ALL_HEALTHY
    # A new kubelet socket alone (the plugin's left in place) is seen too.
    plugin_socket = kubelet.socket_dir / second.endpoint
    before = plugin_socket.stat().st_ino
    kubelet.stop()
    kubelet.start(clean=False)
    third = kubelet.next_registration()
    assert third.wait_list(lambda devices: devices == ALL_HEALTHY) == ALL_HEALTHY
    assert plugin_socket.stat().st_ino == before
