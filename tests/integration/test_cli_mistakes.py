# Every mistake a user can make with the ipufs command, run through the
# real CLI: a non-zero exit, one line on stderr naming the problem and the
# fix, and never a traceback (docs/tools.md, "Exit status").
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.tools.deadline import message
from tests.integration.harness import (daemon_process, ipufs_command, is_mounted, running_daemon, stop_processes,
                                       suspend, wait_for)

pytestmark = pytest.mark.mount


def run(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ipufs_command(*args), stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=30)


def refused(*args: str, status: int = 1, says: tuple[str, ...] = ()) -> str:
    """Run a mistake; check the exit status and the one-line answer."""
    out = run(*args)
    assert out.returncode == status, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and "Errno" not in out.stderr and "Error(" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert line.startswith(f"ipufs {args[0]}: "), line
    for text in says:
        assert text in line, (text, line)
    return line


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    with running_daemon(tmp_path / "mnt", ipus=4, profile="ipu2") as d:
        yield d.mountpoint


@pytest.mark.parametrize("command", [["ls"], ["info"], ["monitor"], ["reset", "-d", "0"], ["trace"],
                                     ["inject", "DEV", "link-down"]])
def test_no_devices(tmp_path: Path, command: list[str]) -> None:
    def at(root: Path) -> list[str]:
        argv = [c if c != "DEV" else f"--dev={root}" for c in command]
        return argv if "DEV" in command else [*argv, f"--dev={root}"]

    refused(*at(tmp_path), says=(f"no IPUs in {tmp_path}", "mount some: run `ipufs mount` as root", "--dev"))
    refused(*at(tmp_path / "nowhere"), says=("does not exist", "run `ipufs mount` as root"))


def test_unknown_device_ids_name_the_valid_ones(mounted: Path) -> None:
    for command in ("info", "reset"):
        refused(command, "-d", "7", "--dev", str(mounted), status=2,
                says=("no device 7", "IPUs 0-3", "multi-IPU devices 4-6", "ipufs ls"))


def test_umount_of_what_is_not_an_ipufs_mount(tmp_path: Path) -> None:
    refused("umount", str(tmp_path / "nonexistent"), says=("does not exist", "ipufs doctor"))
    refused("umount", str(tmp_path), says=(f"{tmp_path} is not an ipufs mount",))


def test_a_second_mount_on_a_live_mount_point(mounted: Path) -> None:
    refused("mount", str(mounted), "--no-link-dev", says=("already mounted", f"ipufs umount {mounted}"))


def test_mount_without_the_right_to_mount(tmp_path: Path) -> None:
    # As a user would be: without CAP_SYS_ADMIN, mount(2) is refused.
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop CAP_SYS_ADMIN")
    target = tmp_path / "user-mnt"
    out = subprocess.run(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin",
                          *ipufs_command("mount", str(target), "--no-link-dev")],
                         capture_output=True, text=True, timeout=30)
    try:
        assert out.returncode == 1 and "Traceback" not in out.stderr
        sudo = f" (`sudo ipufs mount {target}`)" if shutil.which("sudo") else ""  # only where there is one
        assert out.stderr.splitlines() == [
            f"ipufs mount: mounting needs root (with CAP_SYS_ADMIN) to mount FUSE and register passthrough "
            f"files: run `ipufs mount {target}` as root{sudo}"]
    finally:
        if is_mounted(target):
            subprocess.run(ipufs_command("umount", str(target)), timeout=30)


@pytest.mark.parametrize(("text", "says"), [
    ("mode = 660", ('mode = 660 is a TOML integer', 'mode = "0660"')),
    ('ipus = "two"', ('ipus = "two" must be an integer', "ipus = 4")),
    ("ipus = ", ("not valid TOML",)),
    ("colour = 1", ("unknown settings colour",)),
    ('group = "no-such-group-here"', ("no group named no-such-group-here", "groupadd")),
])
def test_bad_configuration_files_name_file_and_key(tmp_path: Path, text: str, says: tuple[str, ...]) -> None:
    config = tmp_path / "ipufs.toml"
    config.write_text(f"[ipufs]\n{text}\n")
    refused("mount", "--config", str(config), str(tmp_path / "mnt"), "--no-link-dev", status=2,
            says=(str(config), *says))
    assert not is_mounted(tmp_path / "mnt")


def test_a_mount_point_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("kept\n")
    refused("mount", str(tmp_path / "file"), "--ipus", "1", "--no-link-dev", "--no-cdi",
            says=(f"{tmp_path / 'file'} is a file, not a directory: ipufs mounts its nodes in a directory",))
    assert (tmp_path / "file").read_text() == "kept\n"


def test_missing_configuration_file(tmp_path: Path) -> None:
    refused("mount", "--config", str(tmp_path / "none.toml"), str(tmp_path / "mnt"), status=2,
            says=("does not exist",))


@pytest.mark.parametrize("name", ["mnt", "ipu"])  # quickstart's /mnt/ipu: a name like a node's
def test_a_dead_daemon_is_named_with_its_cure(tmp_path: Path, name: str) -> None:
    mountpoint = tmp_path / name
    daemon = subprocess.Popen(ipufs_command("mount", str(mountpoint), "--no-link-dev", "--ipus", "1"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: (mountpoint / "ipu0").exists())
        daemon.kill()
        daemon.wait(10)
        for command in ("info", "ls", "monitor", "trace"):
            refused(command, "--dev", str(mountpoint),
                    says=(f"daemon behind {mountpoint} is gone", f"ipufs umount {mountpoint}"))
        assert run("umount", str(mountpoint)).returncode == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
        if is_mounted(mountpoint):
            subprocess.run(ipufs_command("umount", "--abort", str(mountpoint)), timeout=30)
    assert not is_mounted(mountpoint)


STOPPED = [["ls"], ["info"], ["info", "-d", "0"], ["monitor"], ["reset", "-d", "0"], ["inject", "reset"],
           ["trace", "--count", "1"]]


def test_a_stopped_daemon_is_named_within_the_timeout(tmp_path: Path) -> None:
    """A FUSE request waits for a stopped daemon for as long as it stays
    stopped; the tools give up after --timeout and say why, in one line."""
    mountpoint = tmp_path / "mnt"
    daemon = daemon_process(mountpoint, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    try:
        suspend(daemon.pid)
        for command in STOPPED:
            started = time.monotonic()
            line = refused(*command, "--dev", str(mountpoint), "--timeout", "1")
            assert line == message(command[0], str(mountpoint), 1.0)
            assert time.monotonic() - started < 20
        os.kill(daemon.pid, signal.SIGCONT)  # the daemon runs again: so do the tools
        assert run("ls", "--dev", str(mountpoint)).returncode == 0
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
        stop_processes(mountpoint, daemon)
    assert not is_mounted(mountpoint)


def test_a_closed_pipe_ends_quietly(mounted: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # like `ipufs info | head -0`
    try:
        out = run("info", "--dev", str(mounted), stdout=write)
    finally:
        os.close(write)
    assert out.returncode == 128 + signal.SIGPIPE and out.stderr == ""


def test_interrupted_by_ctrl_c_is_quiet(mounted: Path) -> None:
    proc = subprocess.Popen(ipufs_command("monitor", "--watch", "--dev", str(mounted)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and err == ""


def test_bad_options_are_usage_errors() -> None:
    out = run("info", "-d", "x")
    assert out.returncode == 2 and "invalid int value" in out.stderr and "Traceback" not in out.stderr


def test_the_module_runs_as_a_program() -> None:
    assert subprocess.run([sys.executable, "-m", "ipufs", "--version"], capture_output=True,
                          timeout=30).returncode == 0
