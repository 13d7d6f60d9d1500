# Defects a hostile audit found in how daemons come and go, checked with
# real `ipufs mount` processes (docs/reliability.md): `ipufs umount` ends a
# daemon whose files are held, an old daemon never tears down what its
# successor at the same mount point made, a state directory serves one
# daemon at a time, and the trace file neither leaks nor follows links.
from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ipufs.client.control import Control
from ipufs.daemon.trace import TraceFileRefused
from ipufs.driver.nodes import Ownership
from tests.integration.harness import (daemon_process, ipufs_command, is_mounted, running_daemon,
                                       stop_processes, wait_for)

pytestmark = pytest.mark.mount

NOBODY = 65534

HOLDER = textwrap.dedent("""
    import os, sys
    fd = os.open(sys.argv[1] + "/ipu0", os.O_RDWR)
    print("held", flush=True)
    sys.stdin.readline()
    try:
        os.pread(fd, 4, 0)
        print("read", flush=True)
    except OSError as exc:
        print(exc.errno, flush=True)
    sys.stdin.readline()
    os.close(fd)
    print("closed", flush=True)
""")


def start(mnt: Path, dev: Path, *options: str) -> subprocess.Popen[str]:
    """A daemon linking its nodes in ``dev`` and writing its CDI spec in
    ``dev``/cdi."""
    return daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--dev-dir", str(dev),
                          "--cdi-dir", str(dev / "cdi"), *options)


def serves(mnt: Path, daemon: subprocess.Popen[str], dev: Path) -> None:
    """``daemon`` is the one serving at ``mnt``: its mount, its control
    socket, its /dev links and its CDI spec are all in place."""
    assert os.getxattr(mnt, "user.ipufs.pid") == str(daemon.pid).encode()
    with Control.of_mount(mnt) as control:
        assert control.status()
    assert os.readlink(dev / "ipu0") == str(mnt / "ipu0")
    os.close(os.open(dev / "ipu0", os.O_RDWR))
    assert list((dev / "cdi").glob("*.json"))


def test_umount_ends_a_daemon_whose_files_are_held_and_its_successor_survives(tmp_path: Path) -> None:
    mnt, dev = tmp_path / "mnt", tmp_path / "dev"
    dev.mkdir()
    first = start(mnt, dev)
    holder = second = None
    try:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(mnt)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        out = subprocess.run(ipufs_command("umount", str(mnt)), capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert "ENOTCONN" in out.stderr  # it says what it did
        assert first.wait(10) == 0  # the daemon exits, as the help says
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == str(errno.ENOTCONN)
        second = start(mnt, dev)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        assert holder.wait(10) == 0
        serves(mnt, second, dev)
    finally:
        stop_processes(mnt, holder, first, second)


def test_a_hung_daemon_aborted_and_resumed_leaves_its_successor_alone(tmp_path: Path) -> None:
    mnt, dev = tmp_path / "mnt", tmp_path / "dev"
    dev.mkdir()
    first = start(mnt, dev)
    second = None
    try:
        os.kill(first.pid, signal.SIGSTOP)
        subprocess.run(ipufs_command("umount", "--abort", str(mnt)), check=True, timeout=20)
        second = start(mnt, dev)
        os.kill(first.pid, signal.SIGCONT)
        assert first.wait(10) == 0
        assert is_mounted(mnt)
        serves(mnt, second, dev)
        second.send_signal(signal.SIGTERM)
        assert second.wait(10) == 0
        assert not is_mounted(mnt) and not os.path.lexists(dev / "ipu0")
        assert not os.path.lexists(str(mnt) + ".ctl") and not list((dev / "cdi").glob("*.json"))
    finally:
        if first.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
        stop_processes(mnt, first, second)


def test_a_state_directory_serves_one_daemon_at_a_time(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = daemon_process(tmp_path / "a", "--ipus", "1", "--profile", "ipu1", "--no-link-dev",
                           "--state-dir", str(state))
    try:
        mailbox = (state / "ipu0.mailbox").read_bytes()
        (state / "ipu0.mailbox").write_bytes(mailbox)  # nothing but the first daemon touches it
        out = subprocess.run(ipufs_command("mount", str(tmp_path / "b"), "--ipus", "1", "--profile", "ipu1",
                                           "--no-link-dev", "--state-dir", str(state)),
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 1
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and str(state) in lines[0], out.stderr
        assert not is_mounted(tmp_path / "b")
        assert (state / "ipu0.mailbox").read_bytes() == mailbox
        assert os.getxattr(tmp_path / "a", "user.ipufs.pid") == str(first.pid).encode()
        stop_processes(tmp_path / "a", first)  # killed: however it dies, the lock goes with it
        second = daemon_process(tmp_path / "b", "--ipus", "1", "--profile", "ipu1", "--no-link-dev",
                                "--state-dir", str(state))
        stop_processes(tmp_path / "b", second)
    finally:
        if first.returncode is None:
            stop_processes(tmp_path / "a", first)
        stop_processes(tmp_path / "b")


# --- the trace file -------------------------------------------------------------------
WORKLOAD = textwrap.dedent("""
    import os, sys
    for _ in range(200):
        fd = os.open(sys.argv[1] + "/ipu0", os.O_RDWR)
        os.pread(fd, 4, 0)
        os.close(fd)
""")
GROUP = 4242


def test_the_trace_file_gets_the_nodes_owner_and_at_most_their_mode(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    for _ in range(2):  # a new file, then the same one taken up again by the next daemon
        with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(trace),
                            trace_max_bytes=8192, ownership=Ownership(uid=0, gid=GROUP, mode=0o660)) as d:
            subprocess.run([sys.executable, "-c", WORKLOAD, str(d.mountpoint)], check=True, timeout=60)
        for path in (trace, tmp_path / "trace.jsonl.1"):
            st = path.stat()
            assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, 0, GROUP), path
            assert st.st_size > 0
            assert json.loads(path.read_text().splitlines()[0])["kind"] == "trace-file"
        trace.chmod(0o666)  # what was widened meanwhile is narrowed again


def test_an_existing_file_ipufs_did_not_write_is_left_untouched(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$y$j9T$precious:19000:0:99999:7:::\n")
    shadow.chmod(0o640)
    os.chown(shadow, 0, 42)
    before = shadow.stat()
    with pytest.raises(TraceFileRefused, match="was not written by ipufs"):
        with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(shadow), trace_max_bytes=4096,
                            ownership=Ownership(uid=0, gid=GROUP, mode=0o660)):
            pass
    out = subprocess.run(ipufs_command("mount", str(tmp_path / "mnt"), "--ipus", "1", "--no-link-dev", "--no-cdi",
                                       "--trace-file", str(shadow)), capture_output=True, text=True, timeout=20)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "was not written by ipufs" in out.stderr and "left untouched" in out.stderr
    after = shadow.stat()
    assert shadow.read_text() == "root:$y$j9T$precious:19000:0:99999:7:::\n"
    assert (after.st_mode, after.st_uid, after.st_gid, after.st_ino) == (before.st_mode, 0, 42, before.st_ino)
    assert not (tmp_path / "shadow.1").exists() and not is_mounted(tmp_path / "mnt")
    # An empty file is not the daemon's either; nor is a file where rotation would move the trace.
    (tmp_path / "empty").touch()
    with pytest.raises(TraceFileRefused, match="was not written by ipufs"):
        with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(tmp_path / "empty")):
            pass
    (tmp_path / "new.jsonl.1").write_text("precious\n")
    with pytest.raises(TraceFileRefused, match=r"new.jsonl.1, where rotation would move the full trace, exists"):
        with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(tmp_path / "new.jsonl")):
            pass
    assert (tmp_path / "new.jsonl.1").read_text() == "precious\n"


def test_the_trace_file_never_follows_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    trace = tmp_path / "trace.jsonl"
    trace.symlink_to(victim)
    with pytest.raises(TraceFileRefused) as info:
        with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(trace)):
            pass
    assert "symbolic link" in str(info.value)
    assert victim.read_text() == "precious\n"
    assert not is_mounted(tmp_path / "mnt")
    out = subprocess.run(ipufs_command("mount", str(tmp_path / "mnt"), "--ipus", "1", "--no-link-dev",
                                       "--trace-file", str(trace)), capture_output=True, text=True, timeout=20)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert victim.read_text() == "precious\n"
    # A hard link to another file is refused the same way.
    trace.unlink()
    os.link(victim, trace)
    with pytest.raises(TraceFileRefused, match="must be a regular file with one link"):
        with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(trace)):
            pass
    assert victim.read_text() == "precious\n"


def test_another_users_link_as_the_trace_file_is_refused_for_what_it_is(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)  # a sticky, world-writable directory, as /tmp
    trace = shared / "trace.jsonl"
    trace.symlink_to(tmp_path / "victim")
    os.lchown(trace, NOBODY, NOBODY)
    out = subprocess.run(ipufs_command("mount", str(tmp_path / "mnt"), "--ipus", "1", "--no-link-dev", "--no-cdi",
                                       "--trace-file", str(trace)), capture_output=True, text=True, timeout=20)
    assert (out.returncode, out.stderr) == (1, f"ipufs mount: trace file {trace} is a symbolic link (owned by uid "
                                               f"{NOBODY}); the trace is written only to a regular file: remove "
                                               "the link or name another file\n")
    assert not (tmp_path / "victim").exists()
    assert not is_mounted(tmp_path / "mnt")


def test_rotation_never_follows_what_was_planted(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "trace.jsonl.1").symlink_to(victim)  # replaced by the rotation, not written through
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(trace),
                        trace_max_bytes=4096) as d:
        subprocess.run([sys.executable, "-c", WORKLOAD, str(d.mountpoint)], check=True, timeout=60)
        assert wait_for(lambda: d.daemon.tracer.file is not None)
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "trace.jsonl.1").is_symlink()
