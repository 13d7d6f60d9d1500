# GetPreferredAllocation and Allocate through gRPC, as kubelet calls them,
# checked exactly; and bad requests, which get an error with a message
# while the plugin goes on serving.
from __future__ import annotations

import os
import time
from pathlib import Path

import grpc
import pytest

from ipufs import compat
from ipufs.abi.pci import pci_address
from ipufs.deviceplugin import api_pb2 as api
from ipufs.deviceplugin.plugin import MAX_WATCHERS
from tests.deviceplugin.conftest import Plugin
from tests.deviceplugin.kubelet import PluginConnection, TestKubelet
from tests.integration.harness import RunningDaemon

pytestmark = pytest.mark.mount

SUFFIXES = ("", "_ex", "_mailbox", "_mem")
IDS = [f"ipu{i}" for i in range(8)]


@pytest.fixture
def connection(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin) -> PluginConnection:
    plugin("--dev", str(node.mountpoint))
    c = kubelet.next_registration()
    c.wait_list(lambda devices: len(devices) == 8)
    return c


def prefer(c: PluginConnection, available: list[str], size: int, must: list[str] = []) -> list[str]:
    request = api.PreferredAllocationRequest(container_requests=[api.ContainerPreferredAllocationRequest(
        available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size)])
    (answer,) = c.client.GetPreferredAllocation(request, timeout=10).container_responses
    return list(answer.deviceIDs)


def allocate(c: PluginConnection, *containers: list[str]) -> list[api.ContainerAllocateResponse]:
    request = api.AllocateRequest(container_requests=[api.ContainerAllocateRequest(devices_ids=ids)
                                                      for ids in containers])
    return list(c.client.Allocate(request, timeout=10).container_responses)


def binds(root: Path, ipus: list[int], sysfs_dir: Path) -> list[tuple[str, str, bool]]:
    """What a container of the mount gets by bind mounts: the plugin's
    directory for the set at /sys/bus/pci/devices, the compatibility
    library, then each IPU's four nodes and its directory of the view."""
    shared = [("/sys/bus/pci/devices", str(sysfs_dir / "-".join(map(str, sorted(ipus)))), True),
              ("/usr/lib/ipufs/libipufs-compat.so", str(sysfs_dir / "libipufs-compat.so"), True)]
    return shared + [item for i in ipus for item in [
        *((f"/dev/ipu{i}{s}", str(root / f"ipu{i}{s}"), False) for s in SUFFIXES),
        (f"/sys/bus/pci/devices/{pci_address(i)}",
         str(root / "sys/devices" / f"pci{pci_address(i)[:7]}" / pci_address(i)), True)]]


def env(ipus: str) -> dict[str, str]:
    return {"LD_PRELOAD": "/usr/lib/ipufs/libipufs-compat.so", "IPUFS_VISIBLE_IPUS": ipus}


def mounts(answer: api.ContainerAllocateResponse) -> list[tuple[str, str, bool]]:
    return [(m.container_path, m.host_path, m.read_only) for m in answer.mounts]


def test_preferred_allocation_of_1_2_4_of_8_across_two_boards(connection: PluginConnection) -> None:
    assert [prefer(connection, IDS, n) for n in (1, 2, 4)] == [
        ["ipu0"], ["ipu0", "ipu1"], ["ipu0", "ipu1", "ipu2", "ipu3"]]
    # ipu0 taken: the single comes from its broken pair, the pair from the
    # broken board, the four from the whole board.
    rest = IDS[1:]
    assert [prefer(connection, rest, n) for n in (1, 2, 4)] == [
        ["ipu1"], ["ipu2", "ipu3"], ["ipu4", "ipu5", "ipu6", "ipu7"]]
    assert prefer(connection, IDS, 2, must=["ipu6"]) == ["ipu6", "ipu7"]


def test_allocate_gives_bind_mounts_and_names_the_ipus(connection: PluginConnection, node: RunningDaemon,
                                                      socket_dir: Path) -> None:
    first, second = allocate(connection, ["ipu3", "ipu2"], ["ipu7"])
    sysfs_dir = socket_dir / "ipufs-sysfs"
    assert mounts(first) == binds(node.mountpoint, [3, 2], sysfs_dir)
    assert dict(first.envs) == env("3,2")
    assert mounts(second) == binds(node.mountpoint, [7], sysfs_dir)
    assert dict(second.envs) == env("7")
    for answer in (first, second):
        assert not answer.devices and not answer.cdi_devices and not answer.annotations
    # What each container sees at /sys/bus/pci/devices: exactly its IPUs,
    # empty directories for the view's own to be bound onto.
    assert sorted(os.listdir(sysfs_dir)) == ["2-3", "7", "libipufs-compat.so"]
    # The library is a copy kubelet can bind from the host's path.
    assert (sysfs_dir / "libipufs-compat.so").read_bytes() == compat.library_path().read_bytes()
    assert sorted(os.listdir(sysfs_dir / "2-3")) == ["0000:1c:00.0", "0000:1d:00.0"]
    assert os.listdir(sysfs_dir / "7") == ["0000:21:00.0"]
    assert not os.listdir(sysfs_dir / "7" / "0000:21:00.0")
    # Asked again, the same directory; one tampered with is made anew.
    os.rmdir(sysfs_dir / "2-3" / "0000:1c:00.0")
    (again,) = allocate(connection, ["ipu2", "ipu3"])
    assert mounts(again)[0] == ("/sys/bus/pci/devices", str(sysfs_dir / "2-3"), True)
    assert sorted(os.listdir(sysfs_dir / "2-3")) == ["0000:1c:00.0", "0000:1d:00.0"]


def test_allocate_through_dev_links_binds_the_mount(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin,
                                                   tmp_path: Path) -> None:
    links = tmp_path / "dev"
    links.mkdir()
    for name in os.listdir(node.mountpoint):
        os.symlink(node.mountpoint / name, links / name)
    plugin("--dev", str(links), "--sysfs-dir", str(tmp_path / "views"))
    c = kubelet.next_registration()
    c.wait_list(lambda devices: len(devices) == 8)
    (answer,) = allocate(c, ["ipu5"])
    assert mounts(answer) == binds(node.mountpoint, [5], tmp_path / "views")


def test_allocate_says_why_it_cannot_make_the_sysfs_directory(node: RunningDaemon, kubelet: TestKubelet,
                                                              plugin: Plugin, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a directory")
    plugin("--dev", str(node.mountpoint), "--sysfs-dir", str(tmp_path / "taken"))
    c = kubelet.next_registration()
    c.wait_list(lambda devices: len(devices) == 8)
    with pytest.raises(grpc.RpcError) as error:
        allocate(c, ["ipu0"])
    assert (error.value.code(), error.value.details()) == (  # type: ignore[attr-defined]
        grpc.StatusCode.INTERNAL, "cannot make the container's /sys/bus/pci/devices and library in "
                                  f"{tmp_path / 'taken'}: "
                                  "Not a directory")
    assert prefer(c, IDS, 1) == ["ipu0"]  # still serving


@pytest.mark.parametrize("options,names", [
    ((), ["graphcore.ai/ipu=mnt-0", "graphcore.ai/ipu=mnt-1"]),  # as the daemon names a mount's devices
    (("--cdi-prefix", "node7"), ["graphcore.ai/ipu=node7-0", "graphcore.ai/ipu=node7-1"]),
])
def test_allocate_with_cdi_names_the_devices(node: RunningDaemon, kubelet: TestKubelet, plugin: Plugin,
                                             options: tuple[str, ...], names: list[str]) -> None:
    plugin("--dev", str(node.mountpoint), "--cdi", *options)
    c = kubelet.next_registration()
    (answer,) = allocate(c, ["ipu0", "ipu1"])
    assert [d.name for d in answer.cdi_devices] == names
    assert dict(answer.envs) == {"IPUFS_VISIBLE_IPUS": "0,1"}
    assert not answer.mounts and not answer.devices


@pytest.mark.parametrize("containers,message", [
    ([["ipu9"]], "unknown device ipu9: this node has " + ", ".join(IDS)),
    ([["ipu1", "gpu0", "ipu01"]], "unknown device gpu0, ipu01: this node has " + ", ".join(IDS)),
    ([IDS + ["ipu8"]], "asked for 9 IPUs; this node has 8"),
    ([["ipu1", "ipu1"]], "a device is named twice in ipu1, ipu1"),
    ([["ipu0"], []], "a container asked for no device"),
])
def test_bad_allocations_are_refused(connection: PluginConnection, containers: list[list[str]], message: str) -> None:
    with pytest.raises(grpc.RpcError) as error:
        allocate(connection, *containers)
    assert (error.value.code(), error.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)  # type: ignore[attr-defined]
    (answer,) = allocate(connection, ["ipu4"])  # still serving
    assert answer.envs["IPUFS_VISIBLE_IPUS"] == "4"


@pytest.mark.parametrize("available,size,must,message", [
    (IDS, 9, [], "asked for 9 IPUs, but only 8 are available"),
    (["ipu0", "ipu42"], 1, [], "unknown device ipu42: this node has " + ", ".join(IDS)),
    (IDS, 0, [], "allocation size must be positive, not 0"),
    (IDS, 1, ["ipu0", "ipu1"], "2 IPUs must be included in an allocation of 1"),
    (["ipu0", "ipu1"], 2, ["ipu5"], "IPU 5 must be included but is not among the available devices"),
])
def test_bad_preferences_are_refused(connection: PluginConnection, available: list[str], size: int,
                                     must: list[str], message: str) -> None:
    with pytest.raises(grpc.RpcError) as error:
        prefer(connection, available, size, must)
    assert (error.value.code(), error.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)  # type: ignore[attr-defined]
    assert prefer(connection, IDS, 4) == ["ipu0", "ipu1", "ipu2", "ipu3"]


def test_allocate_is_served_whatever_the_number_of_watchers(connection: PluginConnection) -> None:
    extra = 20  # kubelet holds one stream already
    streams = [connection.client.ListAndWatch(api.Empty(), timeout=30) for _ in range(extra)]
    try:
        accepted, refused = 0, []
        for stream in streams:
            try:
                assert len(next(stream).devices) == 8
                accepted += 1
            except grpc.RpcError as exc:
                refused.append((exc.code(), exc.details()))  # type: ignore[attr-defined]
        assert accepted == MAX_WATCHERS - 1
        assert set(refused) == {(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"at most {MAX_WATCHERS} ListAndWatch streams at once (kubelet needs one); "
                                 "try again once one has ended")}
        options = connection.client.GetDevicePluginOptions(api.Empty(), timeout=5)
        assert options.get_preferred_allocation_available
        (answer,) = allocate(connection, ["ipu4"])
        assert answer.envs["IPUFS_VISIBLE_IPUS"] == "4"
        assert prefer(connection, IDS, 2) == ["ipu0", "ipu1"]
    finally:
        for stream in streams:
            stream.cancel()
    # The streams' places are free again once the plugin sees them gone.
    deadline = time.monotonic() + 10
    while True:
        try:
            assert len(next(connection.client.ListAndWatch(api.Empty(), timeout=5)).devices) == 8
            break
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "cancelled streams kept their places"
            time.sleep(0.2)
    assert not connection.ended.is_set()  # kubelet's own stream was never touched
