# Who may use the nodes is decided by the kernel (allow_other with
# default_permissions) from the nodes' owner, group and mode. Checked with
# real unprivileged users: outside the group nothing opens; inside, open,
# mmap, attach and signals all work, and so does the control socket.
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.driver.nodes import Ownership
from ipufs.abi.interrupts import Interrupt
from tests.integration.harness import ROOT, LineClient, RunningDaemon, running_daemon

pytestmark = pytest.mark.mount
GROUP = 4242
MEMBER = 12346
OUTSIDER = 12345


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may traverse (pytest's own are root's, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="ipufs-perm-"))  # in TMPDIR: .ci/run cleans its own
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(shared_dir: Path) -> Iterator[RunningDaemon]:
    client = shared_dir / "ipu-client"
    subprocess.run(["cc", "-static", "-O2", "-I", str(ROOT / "native" / "include"), "-o", str(client),
                    str(ROOT / "native" / "src" / "ipu_client.c")], check=True)
    client.chmod(0o755)
    with running_daemon(shared_dir / "mnt", ipus=1, profile="ipu1",
                        ownership=Ownership(uid=0, gid=GROUP, mode=0o660)) as d:
        yield d


def as_user(uid: int, groups: list[int]) -> dict[str, object]:
    return {"user": uid, "group": uid, "extra_groups": groups}


def test_outside_the_group_nothing_opens(daemon: RunningDaemon) -> None:
    client = daemon.mountpoint.parent / "ipu-client"
    out = subprocess.run([str(client), "--dir", str(daemon.mountpoint), "--interactive"], input="quit\n",
                         capture_output=True, text=True, timeout=20, **as_user(OUTSIDER, []))  # type: ignore[call-overload]
    assert out.returncode == 1
    assert "Permission denied" in out.stderr
    st = os.stat(daemon.path("ipu0"))
    assert (st.st_gid, st.st_mode & 0o777) == (GROUP, 0o660)


def test_in_the_group_open_mmap_attach_and_signals_work(daemon: RunningDaemon) -> None:
    client = daemon.mountpoint.parent / "ipu-client"
    c = LineClient([str(client), "--dir", str(daemon.mountpoint), "--interactive"], "mapped ipu0",
                   **as_user(MEMBER, [GROUP]))
    try:
        assert c.ask("attach") == "ok" and c.ask("setid 77") == "ok"
        att = daemon.daemon.driver.attachments.get(0)
        assert att is not None and att.pid == c.proc.pid
        daemon.call(lambda: daemon.daemon.driver.raise_interrupt(0, Interrupt.GS2_E0))
        assert c.ask("wait 1 2000") == "signals 48:77:-1"
        assert c.ask("exwrite 0 00ff") == "ok"
        assert c.ask("buffer 4096") == "buffer 1"
        daemon.call(lambda: daemon.daemon.driver.dma.write(0, 1, 0, b"\x01\x02"))
        assert c.ask("bufread 1 0 2") == "0102"
    finally:
        c.close("quit")


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a system python3")
@pytest.mark.parametrize("uid,groups,expected", [(OUTSIDER, [], errno.EACCES), (MEMBER, [GROUP], 0)])
def test_the_control_socket_follows_the_nodes(daemon: RunningDaemon, uid: int, groups: list[int],
                                              expected: int) -> None:
    path = os.getxattr(daemon.mountpoint, "user.ipufs.control").decode()
    code = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.connect(sys.argv[1]); print(0)\nexcept OSError as e:\n    print(e.errno)\n")
    out = subprocess.run(["/usr/bin/python3", "-c", code, path], capture_output=True, text=True, timeout=20,
                         **as_user(uid, groups))  # type: ignore[call-overload]
    assert out.stdout.strip() == str(expected), out.stderr
