# `ipufs docker` with real engines: a private dockerd and podman (engines.py)
# run a minimal image whose only program is a static build of the C client.
# In the container the client maps both BARs whole, attaches, and receives
# every kind of signal (44..49) with its si_int from host-side interrupts;
# the daemon detaches it when the container exits or is killed. Podman also
# reads the mount's CDI spec, written and removed by the daemon.
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from ipufs.container import cdi
from ipufs.model.interrupts import Interrupt
from ipufs.model.profile import PROFILES
from tests.integration.engines import IMAGE, EngineSpace, Output, missing_tools
from tests.integration.harness import RunningDaemon, running_daemon, wait_for

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(bool(missing_tools()), reason=f"container engines not installed "
                                 f"(missing {', '.join(missing_tools())}; .ci/run installs them)")]
ENGINES = ["docker", "podman"]
SIGNALS = {Interrupt.EXCEPTION: 44, Interrupt.ICU_DOORBELL: 45, Interrupt.GS1_E0: 46,
           Interrupt.GS1_E1: 47, Interrupt.GS2_E0: 48, Interrupt.GS2_E1: 49}


def start(space: EngineSpace, d: RunningDaemon, engine: str, name: str, *client: str,
          docker: tuple[str, ...] = ()) -> Output:
    argv = space.ipufs("docker", "--engine", engine, "--dev", str(d.mountpoint), *docker, "--",
                       "--rm", "--network", "none", "--name", name, IMAGE, "/bin/ipu-client", *client)
    return Output(space.popen(argv))


def attached(out: Output, ipu: int, ident: int) -> None:
    profile = PROFILES["ipu1"]
    line = out.line()
    assert line == f"mapped ipu{ipu} {profile.config_size} bytes, ipu{ipu}_ex {profile.exchange_size} bytes\n", (
        line + out.finish()[1])
    assert re.fullmatch(rf"attached to ipu{ipu} with id {ident} as pid \d+; listening .*\n", out.line())


@pytest.mark.parametrize("engine", ENGINES)
def test_a_client_in_a_container_gets_every_signal_and_is_detached_when_killed(
        space: EngineSpace, engine_mount: RunningDaemon, engine: str) -> None:
    out = start(space, engine_mount, engine, f"sig-{engine}", "--ipu", "1", "--id", "7", "--listen", "60",
                docker=("--device-id", "1"))
    try:
        attached(out, 1, 7)
        attachment = engine_mount.daemon.driver.attachments.get(1)
        assert attachment is not None and attachment.pid != os.getpid()
        for source, number in SIGNALS.items():
            engine_mount.call(lambda source=source: engine_mount.daemon.driver.raise_interrupt(1, source))  # type: ignore[misc]
            assert out.line().split()[:5] == ["signal", str(number), out_name(number), "si_int", "7"]
        space.run([engine, "kill", f"sig-{engine}"])
        assert wait_for(lambda: engine_mount.daemon.driver.attachments.get(1) is None, 20)
    finally:
        out.finish()


def out_name(number: int) -> str:
    return {44: "PCIE_IPU_EXCEPTION_SIG", 45: "PCIE_ICU_DR_SIG", 46: "PCIE_HSPGS1E0_SIG",
            47: "PCIE_HSPGS1E1_SIG", 48: "PCIE_HSPGS2E0_SIG", 49: "PCIE_HSPGS2E1_SIG"}[number]


@pytest.mark.parametrize("engine", ENGINES)
def test_two_containers_on_two_ipus_and_a_third_finds_one_busy(
        space: EngineSpace, engine_mount: RunningDaemon, engine: str) -> None:
    # Bind mounts, whatever the engine reads (podman's CDI path is tested below).
    first = start(space, engine_mount, engine, f"a-{engine}", "--ipu", "0", "--listen", "60",
                  docker=("--device-id", "0", "--no-cdi"))
    second = start(space, engine_mount, engine, f"b-{engine}", "--ipu", "1", "--listen", "2",
                   docker=("--device-id", "1", "--no-cdi"))
    try:
        attached(first, 0, 0)
        attached(second, 1, 1)
        pids = {engine_mount.daemon.driver.attachments.get(i).pid for i in (0, 1)}  # type: ignore[union-attr]
        assert len(pids) == 2
        engine_mount.call(lambda: engine_mount.daemon.driver.raise_interrupt(0, Interrupt.GS2_E0))
        engine_mount.call(lambda: engine_mount.daemon.driver.raise_interrupt(1, Interrupt.EXCEPTION))
        assert first.line().split()[:5] == ["signal", "48", "PCIE_HSPGS2E0_SIG", "si_int", "0"]
        assert second.line().split()[:5] == ["signal", "44", "PCIE_IPU_EXCEPTION_SIG", "si_int", "1"]
        # The second exits by itself: detached.
        assert wait_for(lambda: engine_mount.daemon.driver.attachments.get(1) is None, 20)
        third = start(space, engine_mount, engine, f"c-{engine}", "--ipu", "0", docker=("--device-id", "0", "--no-cdi"))
        out, err = third.finish()
        assert third.proc.returncode != 0
        assert "ATTACH: Device or resource busy" in err, out + err
    finally:
        space.run([engine, "kill", f"a-{engine}"], check=False)
        first.finish()
        second.finish()


def test_podman_takes_the_ipus_from_the_cdi_spec(space: EngineSpace, tmp_path: Path) -> None:
    where = space.anchor / tmp_path.name
    where.mkdir()
    spec_file = space.cdi_dir / cdi.file_name("")
    try:
        with running_daemon(where / "mnt", ipus=2, profile="ipu1", cdi_dir=str(space.cdi_dir), cdi_prefix="") as d:
            spec = json.loads(spec_file.read_text())
            assert spec["kind"] == "graphcore.ai/ipu" and spec["cdiVersion"] == "0.5.0"
            assert [dev["name"] for dev in spec["devices"]] == ["0", "1", "all"]
            echo = space.run(space.ipufs("docker", "--engine", "podman", "--dev", str(d.mountpoint),
                                         "--device-id", "1", "--echo", "--", IMAGE)).stdout
            assert echo.split(" \\\n    ") == ["podman run", "--device=graphcore.ai/ipu=1", IMAGE + "\n"]

            def nodes(device: str) -> list[str]:
                out = space.run(["podman", "run", "--rm", "--device", device, IMAGE, "ls", "/dev"]).stdout
                return sorted(n for n in out.split() if n.startswith("ipu"))

            assert nodes("graphcore.ai/ipu=1") == ["ipu1", "ipu1_ex", "ipu1_mailbox", "ipu1_mem"]
            assert nodes("graphcore.ai/ipu=all") == sorted(f"ipu{i}{s}" for i in (0, 1)
                                                           for s in ("", "_ex", "_mailbox", "_mem"))
            client = space.run(["podman", "run", "--rm", "--device", "graphcore.ai/ipu=1", IMAGE,
                                "/bin/ipu-client", "--ipu", "1", "--listen", "0"])
            assert "attached to ipu1 with id 1" in client.stdout, client.stderr
            assert d.daemon.driver.attachments.get(1) is None
        assert not spec_file.exists()
        missing = space.run(["podman", "run", "--rm", "--device", "graphcore.ai/ipu=1", IMAGE, "true"], check=False)
        assert missing.returncode != 0 and "graphcore.ai/ipu=1" in missing.stderr
    finally:
        shutil.rmtree(where)


def test_bad_ids_and_missing_images_get_one_line(space: EngineSpace, engine_mount: RunningDaemon) -> None:
    bad = space.run(space.ipufs("docker", "--dev", str(engine_mount.mountpoint), "--device-id", "9", "--", IMAGE),
                    check=False)
    assert bad.returncode == 1
    assert bad.stderr == f"ipufs docker: no device 9 in {engine_mount.mountpoint} (valid: 0, 1; multi-IPU 2; see ipufs ls)\n"
    for engine in ENGINES:
        nothing = space.run(space.ipufs("docker", "--engine", engine, "--dev", str(engine_mount.mountpoint),
                                        "--", "--rm", "no-such-image:1"), check=False)
        assert nothing.returncode == 1
        assert nothing.stderr.startswith(f"ipufs docker: no image 'no-such-image:1' in {engine}'s store"), nothing.stderr
        assert len(nothing.stderr.splitlines()) == 1
