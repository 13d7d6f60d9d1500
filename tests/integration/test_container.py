# What a container runtime does, done with the kernel's own tools: a new
# mount and PID namespace, a minimal root filesystem (only a static build of
# the C reference client), and the four nodes of an IPU bind-mounted at
# /dev/ipu0* inside it. The client attaches, maps both BARs and receives
# the signals the device raises, with the right si_int, in its namespace.
from __future__ import annotations

import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from ipufs.abi.interrupts import Interrupt
from tests.integration.harness import ROOT, running_daemon

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (util-linux)")]


def static_client(out: Path) -> Path:
    binary = out / "ipu-client"
    subprocess.run(["cc", "-static", "-O2", "-I", str(ROOT / "native" / "include"), "-o", str(binary),
                    str(ROOT / "native" / "src" / "ipu_client.c")], check=True)
    return binary


def test_a_namespaced_client_attaches_maps_and_gets_signals(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "dev").mkdir(parents=True)
    shutil.copy(static_client(tmp_path), rootfs / "ipu-client")
    mnt = tmp_path / "mnt"
    with running_daemon(mnt, ipus=2, profile="ipu1") as d:
        binds = "".join(
            f"touch {rootfs}/dev/ipu0{s} && mount --bind {mnt}/ipu0{s} {rootfs}/dev/ipu0{s} && "
            for s in ("", "_ex", "_mailbox", "_mem"))
        script = (f"mount --make-rprivate / && {binds}"
                  f"chroot {rootfs} /ipu-client --dir /dev --ipu 0 --id 5 --listen 5")
        proc = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "sh", "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        timer = threading.Timer(30, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            mapped = proc.stdout.readline()
            # ipu1's exchange BAR has the public size, 0x20000000 (docs/registers.md)
            assert re.fullmatch(r"mapped ipu0 1048576 bytes, ipu0_ex 536870912 bytes\n", mapped), (
                mapped + (proc.stderr.read() if proc.stderr else ""))
            attached = re.fullmatch(r"attached to ipu0 with id 5 as pid (\d+); listening .*\n",
                                    proc.stdout.readline())
            assert attached is not None
            inner_pid = int(attached.group(1))
            att = d.daemon.driver.attachments.get(0)
            assert att is not None
            # The daemon sees the host's pid of the process; inside it is small.
            assert inner_pid < 64 and att.pid != inner_pid
            d.call(lambda: d.daemon.driver.raise_interrupt(0, Interrupt.GS1_E0))
            d.call(lambda: d.daemon.driver.raise_interrupt(0, Interrupt.EXCEPTION))
            lines = [proc.stdout.readline(), proc.stdout.readline()]
            # Both may be pending when the client next runs; Linux then
            # delivers the lower-numbered real-time signal first.
            assert sorted(line.split()[:6] for line in lines) == [
                ["signal", "44", "PCIE_IPU_EXCEPTION_SIG", "si_int", "5", "si_code"],
                ["signal", "46", "PCIE_HSPGS1E0_SIG", "si_int", "5", "si_code"]]
            assert all(line.split()[6] == "-1" for line in lines)  # SI_QUEUE
        finally:
            timer.cancel()
            proc.kill()
            proc.communicate()
