# The unmodified client of the real driver (tests/c/real_client.c, built
# dynamically linked into the engines' test image) in containers of real
# engines: through `ipufs docker` with docker and with podman (bind mounts),
# and through podman's CDI with the mount's spec. Whatever passes the IPUs,
# the container gets the same views as `ipufs run` gives a process: a
# /sys/bus/pci/devices listing exactly its IPUs, and the compatibility
# library preloaded, so the client discovers them through file_name, sees
# character devices, maps, attaches with ATTACH(NULL), sets its id by
# value, exchanges an _IOW mailbox message, resets by value and gets a
# signal of each kind with its si_int from host-side interrupts.
from __future__ import annotations

import re

import pytest

from ipufs.abi.icu import Op
from ipufs.model.interrupts import Interrupt
from ipufs.model.profile import PROFILES
from tests.integration.engines import IMAGE, EngineSpace, Output, missing_tools
from tests.integration.harness import RunningDaemon, wait_for

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(bool(missing_tools()), reason=f"container engines not installed "
                                 f"(missing {', '.join(missing_tools())}; .ci/run installs them)")]

SIGNALS = {Interrupt.EXCEPTION: 44, Interrupt.ICU_DOORBELL: 45, Interrupt.GS1_E0: 46,
           Interrupt.GS1_E1: 47, Interrupt.GS2_E0: 48, Interrupt.GS2_E1: 49}
#: The real client's arguments: an ICU message, a reset of IPU 1, and a
#: signal of each kind.
CLIENT = ["/bin/real-client", "--mailbox", str(int(Op.READ_FIRMWARE_VERSION)), "--reset", "1",
          "--signals", str(len(SIGNALS)), "--timeout", "30000"]


def drive_real_client(out: Output, engine_mount: RunningDaemon, ipus: list[int]) -> None:
    """The real client's session in a container given ``ipus``: it finds
    exactly those, and everything works as under `ipufs run`."""
    profile = PROFILES["ipu1"]
    try:
        lines = [out.line()]
        while lines[-1] not in ("ready\n", "") and not lines[-1].startswith("error"):
            lines.append(out.line())
        assert lines[0] == f"found {len(ipus)}: {' '.join(map(str, ipus))}\n", "".join(lines) + out.finish()[1]
        for ipu in ipus:
            assert f"ipu{ipu} chr 240:{4 * ipu} size 0 mapped {profile.config_size} {profile.exchange_size}\n" in lines, lines
            assert f"attached ipu{ipu} id {100 + ipu}\n" in lines, lines
        # ReadFirmwareVersion: 2.5.9, written back into the _IOW buffer.
        assert f"mailbox 0x{Op.READ_FIRMWARE_VERSION << 16 | 0x20c:08x} 0x00050002 0x00000009 0x00000000 " \
               "0x00000000\n" in lines, lines
        assert "reset ipu1\n" in lines and lines[-1] == "ready\n", lines
        attachment = engine_mount.daemon.driver.attachments.get(ipus[0])
        assert attachment is not None and attachment.ipu_id == 100 + ipus[0]
        for source in SIGNALS:
            engine_mount.call(lambda source=source: engine_mount.daemon.driver.raise_interrupt(ipus[0], source))  # type: ignore[misc]
        got = [out.line() for _ in SIGNALS]
        assert got == [f"signal {n} si_int {100 + ipus[0]} si_code -1\n" for n in SIGNALS.values()], got
        rest, err = out.finish()
        assert out.proc.returncode == 0, rest + err
        # The container is gone: its IPUs are free.
        assert wait_for(lambda: all(engine_mount.daemon.driver.attachments.get(i) is None for i in ipus), 20)
    finally:
        out.finish()


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_the_real_client_in_a_container_of_ipufs_docker(space: EngineSpace, engine_mount: RunningDaemon,
                                                       engine: str) -> None:
    argv = space.ipufs("docker", "--engine", engine, "--no-cdi", "--dev", str(engine_mount.mountpoint), "--device-id", "1",
                       "--", "--rm", "--network", "none", IMAGE, *CLIENT)
    drive_real_client(Output(space.popen(argv)), engine_mount, [1])


@pytest.mark.parametrize("device,ipus", [("1", [1]), ("all", [0, 1])])
def test_the_real_client_in_a_container_of_podmans_cdi(space: EngineSpace, engine_mount: RunningDaemon,
                                                       device: str, ipus: list[int]) -> None:
    argv = ["podman", "run", "--rm", "--network", "none", "--device", f"graphcore.ai/ipu={device}", IMAGE, *CLIENT]
    drive_real_client(Output(space.popen(argv)), engine_mount, ipus)


def test_the_container_sees_the_views_and_nothing_else(space: EngineSpace, engine_mount: RunningDaemon) -> None:
    """What the client relies on, seen with a shell: /sys/bus/pci/devices
    holds the given IPU's directory (read-only, as sysfs is) and nothing
    else, the rest of /sys is the container's own, the library is preloaded."""
    script = ("ls /sys/bus/pci/devices; cat /sys/bus/pci/devices/*/file_name; echo; "
              "cat /sys/bus/pci/devices/*/vendor; echo x > /sys/bus/pci/devices/0000:1b:00.0/serial "
              "|| echo refused; ls -d /sys/class /sys/bus/pci/drivers; echo $LD_PRELOAD")
    for how in (["--no-cdi"], []):
        argv = space.ipufs("docker", "--engine", "podman", *how, "--dev", str(engine_mount.mountpoint), "--device-id", "1",
                           "--", "--rm", "--network", "none", IMAGE, "sh", "-c", script)
        out = space.run(argv)
        lines = out.stdout.splitlines()
        assert lines[:3] == ["0000:1b:00.0", "1", "0x1d95"], out.stdout + out.stderr
        assert lines[3:] == ["refused", "/sys/bus/pci/drivers", "/sys/class", "/usr/lib/ipufs/libipufs-compat.so"], \
            out.stdout
        assert re.search(r"Read-only file system|Permission denied", out.stderr), out.stderr
