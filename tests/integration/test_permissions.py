# Who may use the nodes is decided by the kernel (allow_other with
# default_permissions) from the nodes' owner, group and mode. Checked with
# real unprivileged users: outside the group nothing opens; inside, open,
# mmap, attach and signals all work, and so does the control socket. While
# one member is attached, another may read the IPU but not change it
# (while_attached = "exclusive", the default), nor inject faults into it.
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipufs.abi import ioctls
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.abi.interrupts import Interrupt
from ipufs.driver.nodes import Ownership
from tests.integration.compat_harness import unprivileged_python
from tests.integration.harness import ROOT, LineClient, RunningDaemon, running_daemon

pytestmark = pytest.mark.mount
GROUP = 4242
CONTROL = 4343  # the daemon's control_group
MEMBER = 12346
OTHER_MEMBER = 12347
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
def daemon(shared_dir: Path, request: pytest.FixtureRequest) -> Iterator[RunningDaemon]:
    client = shared_dir / "ipu-client"
    subprocess.run(["cc", "-static", "-O2", "-I", str(ROOT / "native" / "include"), "-o", str(client),
                    str(ROOT / "native" / "src" / "ipu_client.c")], check=True)
    client.chmod(0o755)
    with running_daemon(shared_dir / "mnt", ipus=1, profile="ipu1", control_group=CONTROL,
                        ownership=Ownership(uid=0, gid=GROUP, mode=0o660),
                        while_attached=getattr(request, "param", "exclusive")) as d:
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


#: What a second member tries while the first is attached: open each node
#: for writing, read a register through a read-only open, ask the ICU a
#: query through it, inject a fault and load a plan through the control
#: socket. Run by the system's python3 (nothing of ipufs needed); prints
#: one JSON object: errnos (0: it worked), the ICU's answer, the daemon's.
TRIES = textwrap.dedent("""
    import fcntl, json, os, socket, sys
    mnt, write_read, query, control = sys.argv[1:5]
    out = {}
    for name in ("ipu0", "ipu0_ex", "ipu0_mem", "ipu0_mailbox"):
        try:
            os.close(os.open(f"{mnt}/{name}", os.O_RDWR))
            out[name] = 0
        except OSError as exc:
            out[name] = exc.errno
    fd = os.open(f"{mnt}/ipu0", os.O_RDONLY)
    out["pread"] = len(os.pread(fd, 4, 0))
    answer = bytearray.fromhex(query)
    fcntl.ioctl(fd, int(write_read), answer, True)
    out["icu"] = answer != bytearray.fromhex(query)
    s = socket.socket(socket.AF_UNIX)
    s.connect(control)
    lines = s.makefile()
    for request in ({"op": "inject", "kind": "reset", "ipu": 0}, {"op": "plan", "toml": ""}):
        s.sendall(json.dumps(request).encode() + b"\\n")
        out[request["op"]] = json.loads(lines.readline())
    print(json.dumps(out))
""")


def tries(daemon: RunningDaemon, uid: int, groups: list[int]) -> dict[str, Any]:
    query = MESSAGE.pack(op_word(Op.READ_FIRMWARE_VERSION), 0, 0, 0, 0).hex()
    out = subprocess.run(["/usr/bin/python3", "-c", TRIES, str(daemon.mountpoint),
                          str(ioctls.BY_NAME["MAILBOX_WRITE_READ"].cmd), query, daemon.daemon.config.control_path],
                         capture_output=True, text=True, timeout=30, **as_user(uid, groups))  # type: ignore[call-overload]
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.fixture
def attached(daemon: RunningDaemon) -> Iterator[LineClient]:
    """A member's C client, attached to IPU 0."""
    client = daemon.mountpoint.parent / "ipu-client"
    c = LineClient([str(client), "--dir", str(daemon.mountpoint), "--interactive"], "mapped ipu0",
                   **as_user(MEMBER, [GROUP]))
    try:
        assert c.ask("attach") == "ok"
        yield c
    finally:
        c.close("quit")


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a system python3")
def test_while_a_member_is_attached_another_may_read_but_not_change_the_ipu(daemon: RunningDaemon,
                                                                             attached: LineClient) -> None:
    resets = daemon.daemon.devices.ipus[0].reset_count
    seen = tries(daemon, OTHER_MEMBER, [GROUP, CONTROL])
    busy = {name: errno.EBUSY for name in ("ipu0", "ipu0_ex", "ipu0_mem", "ipu0_mailbox")}
    assert {k: seen[k] for k in busy} == busy
    assert seen["pread"] == 4 and seen["icu"] is True  # reads stay open
    pid = attached.proc.pid
    assert seen["inject"] == {"ok": False, "error": f"IPU 0 is attached to process {pid} of another user: while "
                                                    "it is, only that user and root may inject faults "
                                                    "(while_attached = \"exclusive\")"}
    assert seen["plan"] == {"ok": True, "faults": 0, "seed": 0}  # an empty plan touches no IPU
    # Without the control group, no fault at all; the attached process's user may.
    assert tries(daemon, OTHER_MEMBER, [GROUP])["inject"]["error"].startswith(
        "permission denied: only root, the daemon's user (uid 0) and members of the control group 4343 may")
    # The control socket knows users, not processes: the attached process's
    # user may inject faults into its IPU. The nodes know processes: another
    # process of that user may not open them for writing.
    own = tries(daemon, MEMBER, [GROUP, CONTROL])
    assert own["inject"] == {"ok": True, "fired": "reset ipu=0"} and own["ipu0"] == errno.EBUSY
    assert daemon.daemon.devices.ipus[0].reset_count == resets + 1
    assert attached.ask("reset") == "ok"  # the attached process itself
    assert daemon.daemon.devices.ipus[0].reset_count == resets + 2


def test_the_tools_of_another_member_still_describe_an_attached_ipu(daemon: RunningDaemon,
                                                                    attached: LineClient) -> None:
    python = unprivileged_python(OTHER_MEMBER, (GROUP,))
    out = subprocess.run([*python, "-m", "ipufs", "info", "-d", "0", "--dev", str(daemon.mountpoint)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"  user process id: {attached.proc.pid}" in out.stdout
    assert "  firmware version: " in out.stdout and "  total board power: N/A" not in out.stdout  # the ICU answered
    out = subprocess.run([*python, "-m", "ipufs", "reset", "-d", "0", "--dev", str(daemon.mountpoint)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("ipufs reset: device or resource busy"), out.stderr


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a system python3")
@pytest.mark.parametrize("daemon", ["shared"], indirect=True)
def test_shared_lets_every_member_change_an_attached_ipu(daemon: RunningDaemon, attached: LineClient) -> None:
    seen = tries(daemon, OTHER_MEMBER, [GROUP, CONTROL])
    assert [seen[name] for name in ("ipu0", "ipu0_ex", "ipu0_mem", "ipu0_mailbox")] == [0, 0, 0, 0]
    assert seen["inject"] == {"ok": True, "fired": "reset ipu=0"}
