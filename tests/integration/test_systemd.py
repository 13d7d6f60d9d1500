# The systemd unit is valid, runs under a real systemd (in a container) with
# what its configuration asks for, and the daemon's readiness reaches a
# NOTIFY_SOCKET only once the filesystem answers.
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ipufs.daemon import descriptors
from ipufs.daemon.config import MAX_IPUS
from tests.integration.harness import ROOT, ipufs_command, is_mounted

UNIT = ROOT / "systemd" / "ipufs.service"


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_unit_file_is_valid(tmp_path: Path) -> None:
    # Point ExecStart at this checkout's ipufs, as `./dev install` links it.
    exe = shutil.which("ipufs") or str(Path(os.sys.executable).with_name("ipufs"))  # type: ignore[attr-defined]
    unit = tmp_path / "ipufs.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/ipufs", exe))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    problems = [line for line in out.stderr.splitlines() if "ipufs.service" in line]
    assert out.returncode == 0 and not problems, out.stderr


def test_unit_never_isolates_the_mount_namespace() -> None:
    text = UNIT.read_text()
    for option in ("PrivateTmp=", "ProtectSystem=", "ProtectHome=", "PrivateDevices=", "MountFlags="):
        assert f"\n{option}" not in text
    assert "Type=notify" in text and "Restart=on-failure" in text


def test_units_set_the_open_files_their_service_needs() -> None:
    limit = re.search(r"^LimitNOFILE=(\d+)$", UNIT.read_text(), re.M)
    assert limit and int(limit.group(1)) >= descriptors.needed(MAX_IPUS)
    assert re.search(r"^LimitNOFILE=\d+$", (ROOT / "systemd" / "ipufs-device-plugin.service").read_text(), re.M)


@pytest.mark.mount
def test_ready_is_notified_once_the_filesystem_answers(tmp_path: Path) -> None:
    notify = tmp_path / "notify.sock"
    mnt = tmp_path / "mnt"
    config = tmp_path / "ipufs.toml"
    cdi = tmp_path / "cdi"
    config.write_text(f'[ipufs]\nmountpoint = "{mnt}"\nipus = 2\nprofile = "ipu1"\nlink_dev = false\n'
                      f'cdi_dir = "{cdi}"\n')
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(notify))
        sock.settimeout(20)
        proc = subprocess.Popen(ipufs_command("mount", "--config", str(config)),
                                env={**os.environ, "NOTIFY_SOCKET": str(notify)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            message = sock.recv(4096).decode()
            assert "READY=1" in message.splitlines()
            # Ready means answering: the nodes are there now.
            assert sorted(os.listdir(mnt))[:2] == ["ipu0", "ipu0_ex"]
            assert os.getxattr(mnt, "user.ipufs.ipus") == b"2"
            assert os.listdir(cdi) == ["graphcore.ai-ipu_mnt.json"]  # written before READY
            proc.send_signal(signal.SIGTERM)
            assert sock.recv(4096).decode().startswith("STOPPING=1")
            assert proc.wait(10) == 0
            assert not is_mounted(mnt)
            assert os.listdir(cdi) == []  # and removed at unmount
        finally:
            proc.kill()
            proc.communicate()
            if is_mounted(mnt):
                subprocess.run(["umount", "-l", str(mnt)])


def test_a_config_file_with_unknown_settings_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[ipufs]\nipus = 2\nipu_count = 3\n')
    out = subprocess.run(ipufs_command("mount", "--config", str(config), str(tmp_path / "m")),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "unknown settings ipu_count" in out.stderr


def test_an_out_of_range_spin_is_refused(tmp_path: Path) -> None:
    out = subprocess.run(ipufs_command("mount", "--spin-us", "20000", "--no-link-dev", "--no-cdi", str(tmp_path / "m")),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--spin-us must be between 0 and 10000" in out.stderr
    assert not is_mounted(tmp_path / "m")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _metrics(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text: str = answer.read().decode()
            return text
    except OSError:
        return None


@pytest.mark.mount
@pytest.mark.alone  # the container's systemd opens /dev/fuse to all meanwhile
@pytest.mark.skipif(not shutil.which("systemd-nspawn") or os.geteuid() != 0,
                    reason="needs systemd-nspawn (Debian's systemd-container) and root")
def test_the_unit_serves_a_configured_exporter_under_systemd(tmp_path: Path) -> None:
    """A real systemd runs the unit: systemd-nspawn boots this machine's own
    /usr on a volatile root, with the unit, a configuration that sets an
    exporter, and /dev/fuse; the metrics are scraped from here (the
    container shares the host's network). Under RestrictAddressFamilies=
    AF_UNIX alone the daemon could not bind the exporter and failed to
    start."""
    port = _free_port()
    unit = tmp_path / "ipufs.service"
    exe = Path(sys.executable).with_name("ipufs")
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/ipufs", str(exe)))
    config = tmp_path / "ipufs.toml"
    config.write_text(f'[ipufs]\nmountpoint = "/run/ipufs"\nipus = 1\nprofile = "ipu1"\ncdi = false\n'
                      f'exporter = "127.0.0.1:{port}"\n')
    seen = {ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    binds = [f"--bind-ro={p}" for p in sorted(seen) if not p.is_relative_to("/usr")]
    log = tmp_path / "boot.log"
    # the container's systemd-tmpfiles opens the bound /dev/fuse to all
    # (0666, static-nodes-permissions.conf): the host's mode comes back after
    fuse_mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    with open(log, "w") as out:
        container = subprocess.Popen(
            ["systemd-nspawn", "--directory=/", "--volatile=yes", "--quiet", "--register=no", "--keep-unit",
             f"--machine=ipufs-test-{os.getpid()}", *binds, "--bind=/dev/fuse",
             f"--bind-ro={unit}:/etc/systemd/system/ipufs.service", f"--bind-ro={config}:/etc/ipufs/ipufs.toml",
             "--boot", "--", "systemd.unit=ipufs.service", "systemd.firstboot=off"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120  # a whole boot on a loaded machine
        text = None
        while text is None and time.monotonic() < deadline and container.poll() is None:
            time.sleep(0.5)
            text = _metrics(port)
            if "Failed to start" in log.read_text(errors="replace"):
                break
        booted = log.read_text(errors="replace")
        if text is None and "Failed to create" in booted and "cgroup" in booted:
            pytest.skip(f"systemd-nspawn cannot boot a container here: {booted[-500:]}")
        assert text is not None, booted[-3000:]
        assert re.search(r"^ipufs_up 1(\.0)?$", text, re.M), text  # it read the IPUs through the daemon
        assert re.search(r'^ipufs_ipu_healthy\{[^}]*ipu="0"[^}]*\} 1(\.0)?$', text, re.M), text
        assert "Started" in booted and "ipufs.service" in booted
    finally:
        container.terminate()  # nspawn halts the container: the unit stops, the mount goes with it
        try:
            container.wait(60)
        except subprocess.TimeoutExpired:
            container.kill()
            container.wait()
        os.chmod("/dev/fuse", fuse_mode)
    assert _metrics(port) is None
