# A real ipufs mount, talked to with real system calls from this process
# and from client processes in Python and C: the listing, sizes and modes,
# whole-file mmap, coherence both ways in both modes, config space reaching
# the model, errors of the fixed tree, and clean unmounts.
from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ipufs.model.profile import PROFILES, Region
from ipufs.abi.registers import REGISTERS
from tests.integration.harness import (
    BarClient,
    RunningDaemon,
    abort_connection,
    daemon_process,
    ipufs_command,
    is_mounted,
    python_client,
    running_daemon,
    stop_processes,
    wait_for,
)

pytestmark = pytest.mark.mount

MODES = {"passthrough": True, "page-cache": False}


@pytest.fixture(params=list(MODES))
def ipufs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningDaemon]:
    with running_daemon(tmp_path / "mnt", ipus=2, profile="ipu1", passthrough=MODES[request.param]) as d:
        assert d.daemon.filesystem.mode == request.param
        yield d


@pytest.fixture(params=["python", "c"])
def client(request: pytest.FixtureRequest, c_bar_client: Path) -> Iterator[Callable[[str], BarClient]]:
    started: list[BarClient] = []

    def start(path: str) -> BarClient:
        c = python_client(path) if request.param == "python" else BarClient([str(c_bar_client), path])
        started.append(c)
        return c

    yield start
    for c in started:
        c.close()


def test_listing_sizes_and_modes(ipufs: RunningDaemon) -> None:
    names = sorted(os.listdir(ipufs.mountpoint))
    expected = [f"ipu{i}{s}" for i in range(2) for s in ("", "_ex", "_mailbox", "_mem")]
    assert names == sorted([*expected, "sys"])
    p = PROFILES["ipu1"]
    sizes = {"": p.config_size, "_ex": p.exchange_size, "_mailbox": p.mailbox_size, "_mem": p.host_memory_size}
    for name in expected:
        st = os.stat(ipufs.path(name))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_size == sizes[name.removeprefix("ipu0").removeprefix("ipu1")]
        assert (st.st_uid, st.st_gid) == (0, 0)


@pytest.mark.parametrize("region", list(Region))
def test_client_mapping_and_model_share_memory(
    ipufs: RunningDaemon, client: Callable[[str], BarClient], region: Region
) -> None:
    node = ipufs.daemon.filesystem.tree.node(1, region)
    bar = client(ipufs.path(node.name))
    memory = ipufs.daemon.devices.ipus[1].memory[region]
    assert bar.size == memory.size
    last = bar.size - 8
    # Client -> model: a store through the mapping is what the model reads.
    bar.store(4096, b"\x11\x22\x33\x44")
    bar.store(last, b"tail-end")
    assert ipufs.call(lambda: memory.read(4096, 4)) == b"\x11\x22\x33\x44"
    assert ipufs.call(lambda: memory.read(last, 8)) == b"tail-end"
    # Model -> client: what the model writes, the mapping shows at once.
    ipufs.call(lambda: memory.write(8192, b"from-the-model"))
    assert bar.load(8192, 14) == b"from-the-model"


@pytest.mark.uring
def test_config_space_pread_pwrite_reach_the_model(ipufs: RunningDaemon) -> None:
    ipu = ipufs.daemon.devices.ipus[0]
    fd = os.open(ipufs.path("ipu0"), os.O_RDWR)
    try:
        assert os.pwrite(fd, b"\x01\x00\x00\x80", 0x10C) == 4  # SCRATCH
        assert ipufs.call(lambda: ipu.read_config(0x10C, 4)) == b"\x01\x00\x00\x80"
        ipufs.call(lambda: ipu.write_config(0x8000, b"\xaa\xbb"))
        assert os.pread(fd, 2, 0x8000) == b"\xaa\xbb"
    finally:
        os.close(fd)


@pytest.mark.uring
def test_config_space_takes_many_writes_in_a_row(ipufs: RunningDaemon) -> None:
    """In page-cache mode each write to an open config space waits for a
    retrieve of the mapped pages, whose answers (NOTIFY_REPLY) come on the
    io_uring entries too: every one must give its entry back, or a queue's
    entries run out and a write waits forever (it did at the fourth). A
    child process makes the writes, so that a hang ends in a timeout."""
    script = ("import os, sys\n"
              "fd = os.open(sys.argv[1], os.O_RDWR)\n"
              "for i in range(64):\n"
              "    assert os.pwrite(fd, i.to_bytes(4, 'little'), 0x10C) == 4\n"
              "    assert os.pread(fd, 4, 0x10C) == i.to_bytes(4, 'little')\n"
              "print('done')\n")
    child = subprocess.Popen([sys.executable, "-c", script, str(ipufs.path("ipu0"))], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        out, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        abort_connection(str(ipufs.mountpoint))  # the hung write ends (a kill could not), and the mount can go
        child.kill()
        child.communicate()
        pytest.fail("64 writes to config space did not finish within 30 s")
    assert out.strip() == "done", err


def test_a_second_mapping_sees_a_pwrite(ipufs: RunningDaemon, client: Callable[[str], BarClient]) -> None:
    bar = client(ipufs.path("ipu0_mem"))
    fd = os.open(ipufs.path("ipu0_mem"), os.O_RDWR)
    try:
        os.pwrite(fd, b"written", 12288)
    finally:
        os.close(fd)
    assert bar.load(12288, 7) == b"written"


@pytest.mark.uring
def test_bounds_and_the_fixed_tree_through_system_calls(ipufs: RunningDaemon) -> None:
    size = PROFILES["ipu1"].config_size
    for name in ("ipu0", "ipu0_mem"):
        fd = os.open(ipufs.path(name), os.O_RDWR)
        end = os.fstat(fd).st_size
        try:
            assert os.pread(fd, 16, end) == b""
            with pytest.raises(OSError) as info:
                os.pwrite(fd, b"x", end)
            assert info.value.errno == errno.EPERM
            assert os.pwrite(fd, b"abcd", end - 2) == 2
            assert os.fstat(fd).st_size == end
        finally:
            os.close(fd)
    assert os.stat(ipufs.path("ipu0")).st_size == size
    refused = [
        lambda: os.open(ipufs.path("new"), os.O_CREAT | os.O_RDWR),
        lambda: os.mkdir(ipufs.path("dir")),
        lambda: os.unlink(ipufs.path("ipu0")),
        lambda: os.rename(ipufs.path("ipu0"), ipufs.path("ipu9")),
        lambda: os.truncate(ipufs.path("ipu0_ex"), 0),
        lambda: os.open(ipufs.path("ipu0"), os.O_RDWR | os.O_TRUNC),
        lambda: os.symlink("ipu0", ipufs.path("link")),
        lambda: os.setxattr(ipufs.path("ipu0"), "user.x", b"1"),
    ]
    for action in refused:
        with pytest.raises(OSError) as info:
            action()
        assert info.value.errno == errno.EPERM
    with pytest.raises(FileNotFoundError):
        os.open(ipufs.path("ipu7"), os.O_RDWR)
    assert os.getxattr(str(ipufs.mountpoint), "user.ipufs.profile") == b"ipu1"


def test_chmod_and_chown_by_the_owner(ipufs: RunningDaemon) -> None:
    os.chmod(ipufs.path("ipu1"), 0o600)
    os.chown(ipufs.path("ipu1"), 1234, 1234)
    st = os.stat(ipufs.path("ipu1"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, 1234, 1234)


def test_idle_ipus_cost_no_memory(tmp_path: Path) -> None:
    def rss_kib() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    before = rss_kib()
    with running_daemon(tmp_path / "mnt", ipus=64, profile="ipu2") as d:
        assert len(os.listdir(d.mountpoint)) == 256 + 1  # and sys
        assert rss_kib() - before < 64 * 1024  # 64 IPUs of 1.5 GiB BARs: under 64 MiB


def failure(action: Callable[[], object]) -> int | None:
    """The errno ``action`` fails with (None: it did not)."""
    try:
        action()
    except OSError as exc:
        return exc.errno
    return None


def daemon(mountpoint: Path) -> subprocess.Popen[str]:
    dev = mountpoint.parent / "dev"
    dev.mkdir(exist_ok=True)
    return daemon_process(mountpoint, "--ipus", "1", "--profile", "ipu1", "--dev-dir", str(dev))


@pytest.mark.uring
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "umount"])
def test_daemon_unmounts_cleanly(tmp_path: Path, how: str) -> None:
    mnt = tmp_path / "mnt"
    proc = daemon(mnt)
    try:
        if how == "umount":
            subprocess.run(ipufs_command("umount", str(mnt)), check=True, timeout=10)
        else:
            proc.send_signal(getattr(signal, how))
        assert proc.wait(10) == 0
        assert not is_mounted(mnt)
    finally:
        stop_processes(mnt, proc)


@pytest.mark.uring
def test_a_crashed_daemon_leaves_no_hang_and_a_restart_recovers(tmp_path: Path, fuse_transport: str) -> None:
    mnt = tmp_path / "mnt"
    proc = daemon(mnt)
    restarted = None
    try:
        proc.kill()
        proc.wait(10)
        if fuse_transport == "uring":
            # The kernel ends the connection once it has torn down the dead
            # daemon's rings, which it finishes after the process is gone;
            # a request meanwhile is aborted (docs/reliability.md).
            assert wait_for(lambda: failure(lambda: os.statvfs(mnt)) == errno.ENOTCONN)
        # Callers of a dead daemon fail at once with ENOTCONN; they never hang.
        for action in (lambda: os.open(mnt / "ipu0", os.O_RDWR), lambda: os.statvfs(mnt)):
            with pytest.raises(OSError) as info:
                action()
            assert info.value.errno == errno.ENOTCONN
        restarted = daemon(mnt)
        assert os.stat(mnt / "ipu0").st_size == PROFILES["ipu1"].config_size
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(10) == 0
        assert not is_mounted(mnt)
    finally:
        stop_processes(mnt, proc, restarted)


def test_a_failed_start_leaves_no_mount(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(RuntimeError, match="daemon"):
        with running_daemon(not_a_dir, ipus=1, profile="ipu1"):
            pass
    assert not is_mounted(not_a_dir)
    with pytest.raises(ValueError):
        with running_daemon(tmp_path / "mnt", ipus=1, profile="no-such-profile"):
            pass
    assert not is_mounted(tmp_path / "mnt")


def test_state_dir_keeps_bar_contents_across_mounts(tmp_path: Path, c_bar_client: Path) -> None:
    state = tmp_path / "state"
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", state_dir=state) as d:
        assert os.getxattr(d.mountpoint, "user.ipufs.persistent") == b"1"
        bar = BarClient([str(c_bar_client), d.path("ipu0_ex")])
        try:
            bar.store(65536, b"persist")
        finally:
            bar.close()
        fd = os.open(d.path("ipu0_mem"), os.O_RDWR)
        try:
            assert os.pwrite(fd, b"kept", 100) == 4
            with pytest.raises(OSError) as info:
                os.pwrite(fd, b"x", os.fstat(fd).st_size)
            assert info.value.errno == errno.EPERM
        finally:
            os.close(fd)
    assert sorted(p.name for p in state.iterdir())[:2] == ["ipu0.config", "ipu0.exchange"]
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", state_dir=state) as d:
        memory = d.daemon.devices.ipus[0].memory
        assert d.call(lambda: memory[Region.EXCHANGE].read(65536, 7)) == b"persist"
        assert d.call(lambda: memory[Region.HOST_MEMORY].read(100, 4)) == b"kept"
        assert os.stat(d.path("ipu0_mem")).st_size == PROFILES["ipu1"].host_memory_size


@pytest.mark.parametrize("spin_us", [0, 50, 5000])
def test_the_reader_serves_with_and_without_spinning(tmp_path: Path, spin_us: int) -> None:
    # spin 0: only the blocking fd; otherwise requests may come through the
    # non-blocking clone, whose replies must go back through it.
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", spin_us=spin_us) as d:
        fd = os.open(d.path("ipu0"), os.O_RDWR)
        scratch = REGISTERS["SCRATCH"].offset
        try:
            for i in range(200):
                assert os.pwrite(fd, i.to_bytes(4, "little"), scratch) == 4
                assert os.pread(fd, 4, scratch) == i.to_bytes(4, "little")
        finally:
            os.close(fd)


def test_without_a_clone_the_reader_serves_without_spinning(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from ipufs.fuse.channel import FuseChannel

    def no_clone(self: FuseChannel) -> FuseChannel:
        raise OSError(errno.ENOTTY, "FUSE_DEV_IOC_CLONE not supported")

    monkeypatch.setattr(FuseChannel, "clone", no_clone)
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        fd = os.open(d.path("ipu0"), os.O_RDWR)
        try:
            assert os.pread(fd, 4, REGISTERS["VENDOR_ID"].offset) == (0x1D95).to_bytes(4, "little")
        finally:
            os.close(fd)


def test_a_missing_mount_point_is_made_said_and_removed_at_unmount(tmp_path: Path) -> None:
    mnt = tmp_path / "a" / "b" / "mnt"
    log = tmp_path / "daemon.log"
    with open(log, "w") as out:
        proc = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev", "--control",
                              str(tmp_path / "ctl"), log=out)
    try:
        assert os.listdir(mnt)[:1] == ["ipu0"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop_processes(mnt, proc)
    assert f"created {mnt} (and 2 missing directories above it), which did not exist; removed at unmount" \
        in log.read_text()
    assert os.listdir(tmp_path) == ["daemon.log"]  # a/b/mnt gone; nothing else was made


def test_a_mount_point_that_existed_stays(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop_processes(mnt, proc)
    assert mnt.is_dir() and os.listdir(mnt) == []
