# ListAndWatch follows the devices' health: faults injected with `ipufs
# inject`, a held exception until `ipufs reset`, and a daemon that dies and
# comes back. The plugin runs with a poll interval of a minute, so every
# update seen here came from the daemon's trace or its closed connection.
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import grpc
import pytest

from ipufs.deviceplugin import api_pb2 as api
from tests.deviceplugin.conftest import Plugin
from tests.deviceplugin.kubelet import PluginConnection, TestKubelet
from tests.integration.harness import RunningDaemon, daemon_process, ipufs_command, stop_processes

pytestmark = pytest.mark.mount

EVENTS_ONLY = ("--poll-interval", "60")


def ipufs(mountpoint: Path, command: str, *args: str) -> None:
    out = subprocess.run(ipufs_command(command, "--dev", str(mountpoint), *args), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr


def expect(connection: PluginConnection, **states: str) -> float:
    """Wait for a list where each named IPU has the given health and every
    other one is healthy; returns how long it took."""
    began = time.monotonic()
    connection.wait_list(lambda devices: all(devices.get(d) == states.get(d, "Healthy") for d in devices)
                         and len(devices) == 8)
    return time.monotonic() - began


def test_link_down_and_up(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin) -> None:
    plugin("--dev", str(node.mountpoint), *EVENTS_ONLY)
    connection = kubelet.next_registration()
    expect(connection)
    ipufs(node.mountpoint, "inject", "-d", "1", "link-down")
    took = expect(connection, ipu1="Unhealthy")
    print(f"link-down seen by kubelet {took * 1000:.0f} ms after `ipufs inject` returned")
    ipufs(node.mountpoint, "inject", "-d", "1", "link-up")
    expect(connection)  # the LINK exception stays held, but the link is back


def test_held_exception_until_reset(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin) -> None:
    plugin("--dev", str(node.mountpoint), *EVENTS_ONLY)
    connection = kubelet.next_registration()
    expect(connection)
    ipufs(node.mountpoint, "inject", "-d", "6", "exception", "--cause", "parity")
    expect(connection, ipu6="Unhealthy")
    ipufs(node.mountpoint, "inject", "-d", "3", "icu-timeout")
    expect(connection, ipu6="Unhealthy", ipu3="Unhealthy")
    ipufs(node.mountpoint, "reset", "-d", "6")
    expect(connection, ipu3="Unhealthy")
    ipufs(node.mountpoint, "inject", "-d", "3", "icu-recover")
    expect(connection)


def test_a_dead_daemon_makes_every_ipu_unhealthy_until_one_serves_again(
        tmp_path: Path, kubelet: TestKubelet, plugin: Plugin) -> None:
    mnt = tmp_path / "mnt"
    options = ("--ipus", "8", "--profile", "ipu2", "--no-link-dev")
    daemon = daemon_process(mnt, *options)
    restarted = None
    try:
        plugin("--dev", str(mnt), *EVENTS_ONLY, "--retry-interval", "0.2")
        connection = kubelet.next_registration()
        expect(connection)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
        took = expect(connection, **{f"ipu{i}": "Unhealthy" for i in range(8)})
        print(f"a killed daemon seen by kubelet {took * 1000:.0f} ms after it was reaped")
        restarted = daemon_process(mnt, *options)  # clears the dead mount, mounts anew
        expect(connection)
    finally:
        stop_processes(mnt, daemon, restarted)


def test_a_plugin_started_before_the_daemon_offers_the_ipus_once_it_serves(
        tmp_path: Path, kubelet: TestKubelet, plugin: Plugin) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    daemon = None
    try:
        plugin("--dev", str(mnt), *EVENTS_ONLY, "--retry-interval", "0.2")
        connection = kubelet.next_registration()
        assert connection.wait_list(lambda devices: True) == {}
        with pytest.raises(grpc.RpcError) as error:
            connection.client.Allocate(api.AllocateRequest(container_requests=[
                api.ContainerAllocateRequest(devices_ids=["ipu0"])]), timeout=10)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        assert error.value.details() == (  # type: ignore[attr-defined]
            f"no IPUs to give: no daemon serves {mnt}: no IPUs in {mnt} (no ipuN nodes there)")
        daemon = daemon_process(mnt, "--ipus", "8", "--profile", "ipu2", "--no-link-dev")
        expect(connection)
    finally:
        stop_processes(mnt, daemon)
