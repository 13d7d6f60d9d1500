# A restarted daemon reaches running containers of real podman through the
# CDI devices of `ipufs mount --cdi-follow-restarts` (container/follow.py):
# a container started before the restart keeps running while the daemon is
# stopped and another started at the same mount point; then a client in it
# opens /dev/ipu1 again, attaches to the new daemon and gets its signal. A
# file held across the restart fails with ENOTCONN. The daemons are real
# `ipufs mount` processes mounted under the engine space's anchor.
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.engines import IMAGE, EngineSpace, Output, missing_tools
from tests.integration.harness import ROOT, wait_for

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(bool(missing_tools()), reason=f"container engines not installed "
                                 f"(missing {', '.join(missing_tools())}; .ci/run installs them)")]
PREFIX = "r"


class Daemon:
    """`ipufs mount --cdi-follow-restarts` of two ipu1 IPUs, as a process."""

    def __init__(self, space: EngineSpace, mountpoint: Path) -> None:
        self.mountpoint = mountpoint
        argv = [sys.executable, "-m", "ipufs", "mount", str(mountpoint), "--ipus", "2", "--profile", "ipu1",
                "--no-link-dev", "--cdi-dir", str(space.cdi_dir), "--cdi-prefix", PREFIX, "--cdi-follow-restarts"]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        spec = space.cdi_dir / f"graphcore.ai-ipu_{PREFIX}.json"
        if not wait_for(lambda: spec.exists() or self.proc.poll() is not None, 30) or not spec.exists():
            self.stop()
            raise RuntimeError(f"ipufs mount did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True)


@pytest.fixture
def where(space: EngineSpace, tmp_path: Path) -> Iterator[Path]:
    with space.workdir(tmp_path.name) as where:
        yield where


def inject_exception(mountpoint: Path, ipu: int) -> None:
    subprocess.run([sys.executable, "-m", "ipufs", "inject", "--dev", str(mountpoint), "-d", str(ipu), "exception"],
                   cwd=ROOT, check=True, capture_output=True, timeout=30)


def client_gets_a_signal(space: EngineSpace, mountpoint: Path) -> None:
    out = Output(space.popen(["podman", "exec", "follow", "/bin/ipu-client", "--ipu", "1", "--id", "5",
                              "--listen", "5"]))
    try:
        line = out.line()
        assert line.startswith("mapped ipu1 "), line + out.finish()[1]
        assert re.match(r"attached to ipu1 with id 5 ", out.line())
        inject_exception(mountpoint, 1)
        assert out.line().split()[:5] == ["signal", "44", "PCIE_IPU_EXCEPTION_SIG", "si_int", "5"]
    finally:
        out.proc.kill()
        out.finish()


def test_a_running_container_reaches_a_restarted_daemon(space: EngineSpace, where: Path) -> None:
    mountpoint = where / "mnt"
    daemon = Daemon(space, mountpoint)
    held: Output | None = None
    try:
        spec = json.loads((space.cdi_dir / f"graphcore.ai-ipu_{PREFIX}.json").read_text())
        assert [d["name"] for d in spec["devices"]] == ["r-0", "r-1", "r-all"]
        space.run(["podman", "run", "-d", "--name", "follow", "--network", "none", "--device",
                   f"graphcore.ai/ipu={PREFIX}-1", IMAGE, "sleep", "600"])
        listing = space.run(["podman", "exec", "follow", "sh", "-c",
                             "echo /dev/ipu*; ls /sys/bus/pci/devices; cat /sys/bus/pci/devices/*/file_name"])
        assert listing.stdout.split() == ["/dev/ipu1", "/dev/ipu1_ex", "/dev/ipu1_mailbox", "/dev/ipu1_mem",
                                          "0000:1b:00.0", "1"]
        client_gets_a_signal(space, mountpoint)
        # A file held across the restart.
        held = Output(space.popen(["podman", "exec", "follow", "sh", "-c",
                                   "exec 3</dev/ipu1_mailbox && echo opened && "
                                   "while [ ! -e /tmp/go ]; do sleep 0.1; done; cat <&3 >/dev/null; echo status $?"]))
        assert held.line() == "opened\n"
        daemon.stop()
        gone = space.run(["podman", "exec", "follow", "cat", "/dev/ipu1_mailbox"], check=False)
        assert gone.returncode != 0 and "No such file" in gone.stderr, gone
        daemon = Daemon(space, mountpoint)
        assert space.run(["podman", "ps", "-q", "--filter", "name=follow"]).stdout.strip()
        client_gets_a_signal(space, mountpoint)
        space.run(["podman", "exec", "follow", "sh", "-c", "echo > /tmp/go"])
        rest, err = held.finish()
        assert "Transport endpoint is not connected" in err and rest == "status 1\n", (rest, err)
    finally:
        if held is not None:
            held.proc.kill()
            held.finish()
        space.run(["podman", "rm", "-f", "-t", "0", "follow"], check=False)
        daemon.stop()


def test_the_hook_refuses_what_it_is_not_for(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "rootfs" / "dev").mkdir(parents=True)
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}}))
    state = json.dumps({"bundle": str(bundle)})

    def hook(*links: str, stdin: str = state) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ipufs", "cdi-hook", *links], cwd=ROOT, input=stdin,
                              capture_output=True, text=True, timeout=30)

    ok = hook("/dev/ipu0=/run/ipufs-follow/mount/ipu0")
    assert ok.returncode == 0, ok.stderr
    assert os.readlink(bundle / "rootfs" / "dev" / "ipu0") == "/run/ipufs-follow/mount/ipu0"
    for links, stdin, message in [(("/etc/passwd=/x",), state, "links go in /dev/ or /sys/bus/pci/devices/"),
                                  (("/dev/ipu0=/x",), state, "File exists"),
                                  (("/dev/ipu1=/x",), "{}", "names no bundle"),
                                  ((), state, "usage: ipufs cdi-hook")]:
        out = hook(*links, stdin=stdin)
        assert out.returncode == 1 and out.stdout == "" and message in out.stderr, out
        assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr
