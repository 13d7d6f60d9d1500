# FORGET accounting, and unmounting while clients still hold mappings.
# INTERRUPT and DESTROY are covered at the session level (tests/fuse): every
# request is answered when read, so an INTERRUPT always names a request
# already answered and is ignored; the kernel sends DESTROY only to
# block-device FUSE mounts, which ipufs is not.
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ipufs.abi import ioctls as abi
from tests.integration.harness import daemon_process, is_mounted, running_daemon, stop_processes, wait_for

pytestmark = [pytest.mark.mount, pytest.mark.uring]


@pytest.mark.alone  # it drops the kernel's dentries and inodes, every mount's
def test_forget_returns_every_lookup(tmp_path: Path) -> None:
    with running_daemon(tmp_path / "mnt", ipus=2, profile="ipu1") as d:
        fs = d.daemon.filesystem
        for name in os.listdir(d.mountpoint):
            os.stat(d.path(name))
        for where, _, names in os.walk(d.path("sys")):  # the view's directories, files and links
            for name in names:
                os.lstat(os.path.join(where, name))
        assert sum(fs.stats.lookups.values()) >= 8 + 2 * 30
        # Make the kernel drop its dentries and inodes: it sends FORGET (or
        # BATCH_FORGET) for each, returning every lookup count to zero.
        def dropped() -> bool:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2")
            return not fs.stats.lookups
        assert wait_for(dropped, 5), fs.stats.lookups


HOLDER = textwrap.dedent("""
    import fcntl, mmap, os, sys
    fd = os.open(sys.argv[1] + "/ipu0_ex", os.O_RDWR)
    bar = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED)
    bar[0:5] = b"hello"
    print("mapped", flush=True)
    sys.stdin.readline()  # the daemon unmounts and exits meanwhile
    bar[5:11] = b" world"
    print(bar[0:11].decode(), flush=True)
    try:
        fcntl.ioctl(fd, int(sys.argv[2]))
        print("ioctl ok", flush=True)
    except OSError as exc:
        print("ioctl", exc.errno, flush=True)
""")


def test_unmount_while_a_client_holds_a_mapping(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    daemon = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    holder = None
    try:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(mnt), str(abi.BY_NAME["ATTACH"].cmd)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "mapped"
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(10) == 0  # a busy mount is detached lazily; the daemon still exits
        assert not is_mounted(mnt)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        # The mapping is the backing memory itself: it stays usable...
        assert holder.stdout.readline().strip() == "hello world"
        # ...while anything that needs the daemon fails at once.
        assert holder.stdout.readline().split() == ["ioctl", str(errno.ENOTCONN)]
        assert holder.wait(10) == 0
    finally:
        stop_processes(mnt, holder, daemon)


def test_interrupt_of_an_answered_request_is_harmless(tmp_path: Path) -> None:
    # A signal to a client inside a FUSE request makes the kernel send
    # INTERRUPT; ipufs has already answered, so the client sees its result
    # (or EINTR), and the daemon goes on.
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        code = textwrap.dedent("""
            import os, signal, sys
            signal.signal(signal.SIGUSR1, lambda *a: None)
            signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
            signal.signal(signal.SIGALRM, lambda *a: None)
            fd = os.open(sys.argv[1] + "/ipu0", os.O_RDWR)
            for i in range(3000):
                try:
                    os.pread(fd, 4, 0)
                except InterruptedError:
                    pass
            print("ok")
        """)
        out = subprocess.run([sys.executable, "-c", code, str(d.mountpoint)], capture_output=True, text=True,
                             timeout=60)
        assert out.stdout.strip() == "ok", out.stderr
        assert os.getxattr(d.mountpoint, "user.ipufs.ipus") == b"1"


def test_abort_frees_the_callers_of_a_hung_daemon(tmp_path: Path, fuse_transport: str) -> None:
    mnt = tmp_path / "mnt"
    daemon = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    caller = None
    try:
        os.kill(daemon.pid, signal.SIGSTOP)  # hung: alive, answering nothing
        code = ("import os, sys\ntry:\n    os.open(sys.argv[1] + '/ipu0', os.O_RDWR)\n    print('opened')\n"
                "except OSError as exc:\n    print(exc.errno)\n")
        caller = subprocess.Popen([sys.executable, "-c", code, str(mnt)], stdout=subprocess.PIPE, text=True)
        with pytest.raises(subprocess.TimeoutExpired):
            caller.wait(0.5)  # waiting on the daemon
        subprocess.run([sys.executable, "-m", "ipufs", "umount", "--abort", str(mnt)], check=True, timeout=20)
        if fuse_transport == "uring":
            # The kernel gave the request to a ring entry of the stopped
            # daemon's: the abort ends it only once that ring's thread runs
            # (docs/reliability.md).
            with pytest.raises(subprocess.TimeoutExpired):
                caller.wait(0.5)
            os.kill(daemon.pid, signal.SIGCONT)
        out, _ = caller.communicate(timeout=10)
        # A request in flight at the abort fails with ECONNABORTED (ipufs
        # negotiates FUSE_ABORT_ERROR); requests after it get ENOTCONN.
        assert out.strip() == str(errno.ECONNABORTED)
        assert not is_mounted(mnt)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
        stop_processes(mnt, caller, daemon)
