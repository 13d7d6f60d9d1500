# FUSE over io_uring through real mounts (ipufs/fuse/uring.py): a ring
# thread per CPU, pinned to it, serves the clients on that CPU, answering
# fast requests itself and handing the rest to Python; a daemon killed
# while clients hammer it, or unmounted under them, leaves no caller
# hanging (docs/reliability.md); `--uring` chooses, says why, and refuses
# in one line. Each test sets the fuse module's enable_uring itself and
# restores it on every path.
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ipufs.fuse import uring
from ipufs.run import services
from tests.integration import harness
from tests.integration.harness import daemon_process, ipufs_command, is_mounted, running_daemon, stop_processes

pytestmark = [pytest.mark.mount, pytest.mark.alone]  # each sets enable_uring

#: What a caller of a daemon that went away may see: its request in flight
#: aborted (ECONNABORTED) or cancelled with its ring (ECANCELED), and
#: ENOTCONN for any request after.
GONE = {errno.ECONNABORTED, errno.ECANCELED, errno.ENOTCONN}

#: A client pinned to one CPU: a fast ioctl (MAILBOX_GET_OFFSETS, answered
#: by the ring thread) and a request for Python (GETXATTR), COUNT
#: times each, or until the connection fails (-1: until then).
HAMMER = textwrap.dedent("""
    import errno, fcntl, os, sys
    from ipufs.abi import ioctls as abi
    cpu, mnt, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    os.sched_setaffinity(0, {cpu})
    cmd = abi.BY_NAME["MAILBOX_GET_OFFSETS"].cmd
    fd = os.open(mnt + "/ipu0_mailbox", os.O_RDWR)
    print("ready", flush=True)
    n = 0
    try:
        while count < 0 or n < count:
            fcntl.ioctl(fd, cmd, bytearray(abi.ioc_fields(cmd)[3]), True)
            os.getxattr(fd, "user.ipufs.ipu")
            n += 1
    except OSError as exc:
        print("errno", exc.errno, flush=True)
        sys.exit(0)
    print("done", n, flush=True)
""")


@pytest.fixture(autouse=True)
def kernel_has_it() -> None:
    if not harness.ENABLE_URING.exists():
        pytest.skip("this kernel lacks FUSE over io_uring")


def hammers(mnt: Path, count: int, per_cpu: int = 2) -> list[subprocess.Popen[bytes]]:
    """``per_cpu`` HAMMER clients on every CPU this process may use, each
    started and ready. Their pipes are unbuffered: a client may finish
    before its "ready" is read, and a buffered readline would then take
    the last line too, out of communicate's sight."""
    procs = [subprocess.Popen([sys.executable, "-c", HAMMER, str(cpu), str(mnt), str(count)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, cwd=harness.ROOT)
             for cpu in sorted(os.sched_getaffinity(0)) for _ in range(per_cpu)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
    return procs


def outcome(proc: subprocess.Popen[bytes]) -> list[str]:
    """What the client printed after "ready", or, when it printed nothing,
    its exit status and what it wrote to stderr."""
    out, err = proc.communicate(timeout=20)
    return out.decode().split() or [f"status {proc.returncode}", err.decode()]


def ring_threads() -> dict[str, str]:
    """This process's ring threads: name -> the CPUs it may run on."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
        except FileNotFoundError:
            continue  # ended meanwhile
        if name.startswith("ipufs-ring-"):
            found[name] = next(line.split()[1] for line in status.splitlines()
                               if line.startswith("Cpus_allowed_list:"))
    return found


def test_a_ring_per_cpu_pinned_to_it_serves_the_clients_there(tmp_path: Path) -> None:
    with harness.on_transport("uring"), running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        assert ring_threads() == {f"ipufs-ring-{q}": str(q) for q in range(uring.possible_cpus())}
        transport = d.daemon.server.transport
        assert isinstance(transport, uring.Uring) and transport.rings is not None
        before = transport.rings.counts()
        clients = hammers(d.mountpoint, 300)
        outcomes = [outcome(c) for c in clients]
        assert all(o == ["done", "300"] for o in outcomes), outcomes
        answered, handed = (after - was for after, was in zip(transport.rings.counts(), before, strict=True))
        # The ring threads answered the ioctls; Python the GETXATTRs.
        assert answered >= 300 * len(clients) and handed >= 300 * len(clients)
    assert not ring_threads()  # stopped with the mount


def test_a_daemon_killed_while_clients_hammer_it_leaves_none_hanging(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    with harness.on_transport("uring"):
        daemon = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    clients: list[subprocess.Popen[bytes]] = []
    restarted = None
    try:
        clients = hammers(mnt, -1)
        daemon.kill()
        daemon.wait(10)
        for c in clients:
            word, code = outcome(c)
            assert word == "errno" and int(code) in GONE, (word, code)
        with harness.on_transport("uring"):
            restarted = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
        assert os.getxattr(mnt, "user.ipufs.ipus") == b"1"
    finally:
        stop_processes(mnt, *clients, daemon, restarted)


@pytest.mark.parametrize("how", ["umount", "SIGTERM"])
def test_unmounting_while_the_rings_are_busy_ends_every_caller(tmp_path: Path, how: str) -> None:
    mnt = tmp_path / "mnt"
    with harness.on_transport("uring"):
        daemon = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    clients: list[subprocess.Popen[bytes]] = []
    try:
        clients = hammers(mnt, -1)
        if how == "umount":
            subprocess.run(ipufs_command("umount", str(mnt)), check=True, timeout=20)
        else:
            daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(20) == 0
        assert not is_mounted(mnt)
        for c in clients:
            word, code = outcome(c)
            assert word == "errno" and int(code) in GONE, (word, code)
    finally:
        stop_processes(mnt, *clients, daemon)


def test_uring_on_where_the_parameter_is_off_fails_in_one_line(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with harness.uring_parameter("N"):
        out = subprocess.run(ipufs_command("mount", str(mnt), "--uring", "on", "--no-cdi", "--no-link-dev"),
                             capture_output=True, text=True, timeout=30)
        assert harness.ENABLE_URING.read_text().strip() == "N"  # never flipped by the daemon
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--uring on" in lines[0] and "enable_uring is off" in lines[0], out.stderr
    assert not is_mounted(mnt)


@pytest.mark.parametrize("value", ["N", "Y"])
def test_auto_follows_the_parameter_and_the_mount_says_which_path_and_why(tmp_path: Path, value: str) -> None:
    with harness.uring_parameter(value), running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", transports={"uring": "auto"}) as d:
        shown = os.getxattr(d.mountpoint, "user.ipufs.transport").decode()
        status = {m.mountpoint: m.transport for m in services.mount_status()}[str(d.mountpoint)]
    assert status == shown
    if value == "Y":
        assert shown == "FUSE over io_uring (--uring auto: the kernel offers it and enable_uring is Y)"
    else:
        assert shown.startswith("/dev/fuse (the fuse module parameter enable_uring is off")
