# Allocate's answer, applied by real podman (the engine space of
# tests/integration/engines.py), gives a container working IPUs: the mounts
# and environment kubelet would pass, or the CDI names, each run with the
# static C client, which maps both BARs, attaches and gets a signal raised
# on the host side, and with the unmodified client of the real driver,
# which finds exactly its IPU in the container's /sys/bus/pci/devices and
# works through the preloaded compatibility library.
from __future__ import annotations

import pytest

from ipufs.deviceplugin import api_pb2 as api
from ipufs.model.interrupts import Interrupt
from tests.deviceplugin.conftest import Plugin
from tests.deviceplugin.kubelet import TestKubelet
from tests.integration.engines import IMAGE, EngineSpace, Output, missing_tools
from tests.integration.harness import RunningDaemon, wait_for
from tests.integration.test_engine_views import CLIENT, drive_real_client
from tests.integration.test_engines import attached

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(bool(missing_tools()), reason=f"container engines not installed "
                                 f"(missing {', '.join(missing_tools())}; .ci/run installs them)")]


def podman_options(answer: api.ContainerAllocateResponse) -> list[str]:
    """What a runtime does with an Allocate answer, as podman options."""
    options = []
    for m in answer.mounts:
        options.append(f"--mount=type=bind,source={m.host_path},target={m.container_path}"
                       + (",ro" if m.read_only else ""))
    options += [f"--device={d.name}" for d in answer.cdi_devices]
    options += [f"--env={k}={v}" for k, v in sorted(answer.envs.items())]
    return options


@pytest.mark.parametrize("style", [(), ("--cdi", "--cdi-prefix", "")], ids=["mounts", "cdi"])
def test_a_container_given_what_allocate_answers_uses_its_ipu(
        space: EngineSpace, engine_mount: RunningDaemon, kubelet: TestKubelet, plugin: Plugin,
        style: tuple[str, ...]) -> None:
    plugin("--dev", str(engine_mount.mountpoint), *style)
    connection = kubelet.next_registration()
    connection.wait_list(lambda devices: devices == {"ipu0": "Healthy", "ipu1": "Healthy"})
    request = api.AllocateRequest(container_requests=[api.ContainerAllocateRequest(devices_ids=["ipu1"])])
    (answer,) = connection.client.Allocate(request, timeout=10).container_responses
    options = podman_options(answer)
    env = space.run(["podman", "run", "--rm", *options, IMAGE, "sh", "-c",
                     "echo $IPUFS_VISIBLE_IPUS; ls /sys/bus/pci/devices; ls /dev"])
    assert env.stdout.split()[:2] == ["1", "0000:1b:00.0"]
    assert sorted(n for n in env.stdout.split() if n.startswith("ipu")) == ["ipu1", "ipu1_ex", "ipu1_mailbox",
                                                                           "ipu1_mem"]
    name = f"dp-{'cdi' if style else 'mounts'}"
    out = Output(space.popen(["podman", "run", "--rm", "--name", name, *options, IMAGE,
                              "/bin/ipu-client", "--ipu", "1", "--id", "9", "--listen", "60"]))
    try:
        attached(out, 1, 9)
        engine_mount.call(lambda: engine_mount.daemon.driver.raise_interrupt(1, Interrupt.GS1_E0))
        assert out.line().split()[:5] == ["signal", "46", "PCIE_HSPGS1E0_SIG", "si_int", "9"]
        space.run(["podman", "kill", name])
        assert wait_for(lambda: engine_mount.daemon.driver.attachments.get(1) is None, 20)
    finally:
        space.run(["podman", "kill", name], check=False)
        out.finish()
    real = Output(space.popen(["podman", "run", "--rm", "--network", "none", *options, IMAGE, *CLIENT]))
    drive_real_client(real, engine_mount, [1])
