# The gc-style tools against a real mount, run as a user would run them.
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.client import Control, Device
from tests.integration.harness import RunningDaemon, ipufs_command, is_mounted, running_daemon

pytestmark = pytest.mark.mount


@pytest.fixture
def board(tmp_path: Path) -> Iterator[RunningDaemon]:
    with running_daemon(tmp_path / "mnt", ipus=4, profile="ipu2") as d:
        yield d


def ipufs(*args: str) -> str:
    out = subprocess.run(ipufs_command(*args), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_ls_is_shaped_like_gc_info(board: RunningDaemon) -> None:
    assert ipufs("ls", "--dev", str(board.mountpoint)).splitlines() == [
        "Graphcore device listing:",
        "-+- Id:  [0], type:      [PCIe], PCI Domain: [0000:1a:00.0]",
        "-+- Id:  [1], type:      [PCIe], PCI Domain: [0000:1b:00.0]",
        "-+- Id:  [2], type:      [PCIe], PCI Domain: [0000:1c:00.0]",
        "-+- Id:  [3], type:      [PCIe], PCI Domain: [0000:1d:00.0]",
        "-+- Id:  [4], type: [Multi IPU]",
        " |--- PCIe Id:  [0], DNC Id: [0], PCI Domain: [0000:1a:00.0]",
        " |--- PCIe Id:  [1], DNC Id: [1], PCI Domain: [0000:1b:00.0]",
        "-+- Id:  [5], type: [Multi IPU]",
        " |--- PCIe Id:  [2], DNC Id: [0], PCI Domain: [0000:1c:00.0]",
        " |--- PCIe Id:  [3], DNC Id: [1], PCI Domain: [0000:1d:00.0]",
        "-+- Id:  [6], type: [Multi IPU]",
        " |--- PCIe Id:  [0], DNC Id: [0], PCI Domain: [0000:1a:00.0]",
        " |--- PCIe Id:  [1], DNC Id: [1], PCI Domain: [0000:1b:00.0]",
        " |--- PCIe Id:  [2], DNC Id: [2], PCI Domain: [0000:1c:00.0]",
        " |--- PCIe Id:  [3], DNC Id: [3], PCI Domain: [0000:1d:00.0]",
    ]
    devices = json.loads(ipufs("ls", "--json", "--dev", str(board.mountpoint)))["devices"]
    assert devices[6] == {"id": 6, "type": "Multi IPU", "members": [0, 1, 2, 3]}


def test_info_uses_gc_info_field_names(board: RunningDaemon) -> None:
    text = ipufs("info", "-d", "2", "--dev", str(board.mountpoint))
    fields = dict(line.split(": ", 1) for line in text.splitlines())
    assert fields["id"] == "2" and fields["target"] == "PCIe"
    assert fields["board type"] == "M2000" and fields["board ipu index"] == "2"
    assert fields["ipu architecture"] == "ipu2" and fields["ipu error state"] == "no errors"
    assert fields["firmware version"] == "2.5.9" and fields["icu bootloader version"] == "1.0.4"
    assert fields["link speed"] == "16.0 GT/s" and fields["clock"] == "1330MHz"
    assert fields["total board power"] == "150.0 W" and fields["pci id"] == "[0000:1c:00.0]"
    assert "attached user process id" not in fields


def test_info_and_monitor_show_the_attached_process(board: RunningDaemon) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from ipufs.client import Device, SignalReceiver\n"
         "s = SignalReceiver(); d = Device(1, sys.argv[1]); d.attach(); print('ok', flush=True); sys.stdin.read()",
         str(board.mountpoint)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        info = json.loads(ipufs("info", "-d", "1", "--json", "--dev", str(board.mountpoint)))[0]
        assert info["attached user process id"] == str(holder.pid)
        assert info["attached user name"] == "root"
        rows = json.loads(ipufs("monitor", "--once", "--json", "--dev", str(board.mountpoint)))["ipus"]
        assert [r["pid"] for r in rows] == [None, holder.pid, None, None]
        assert rows[1]["command"] == "python" or rows[1]["command"].startswith("python")
        text = ipufs("monitor", "--once", "--dev", str(board.mountpoint))
        assert f" {holder.pid} " in text and "1330MHz" in text
    finally:
        holder.kill()
        holder.communicate()


def test_reset_resets_the_device(board: RunningDaemon) -> None:
    assert ipufs("reset", "-d", "3", "--dev", str(board.mountpoint)).strip() == "IPU 3 reset (reset count 1)"
    assert board.daemon.devices.ipus[3].reset_count == 1


def test_docker_echo_binds_the_four_nodes(board: RunningDaemon) -> None:
    m = board.mountpoint
    out = ipufs("docker", "--device-id", "0", "--device-id", "2", "--echo", "--dev", str(m),
                "--", "-ti", "graphcore/tools", "gc-inventory")
    expected = ["docker", "run"]
    for i in (0, 2):
        for s in ("", "_ex", "_mailbox", "_mem"):
            expected += ["--mount", f"type=bind,source={m}/ipu{i}{s},target=/dev/ipu{i}{s}"]
    assert out.split() == expected + ["-ti", "graphcore/tools", "gc-inventory"]
    assert ipufs("docker", "--all", "--echo", "--engine", "podman", "--no-cdi", "--dev", str(m), "--", "img"
                 ).count("--mount") == 16
    # No ids: every IPU, as gc-docker; a multi-IPU id of `ipufs ls`: its members.
    assert ipufs("docker", "--echo", "--no-cdi", "--dev", str(m), "--", "img").count("--mount") == 16
    group = ipufs("docker", "--echo", "--device-id", "5", "--dev", str(m), "--", "img").split()
    assert [a.split(",")[2] for a in group if a.startswith("type=bind")] == [
        f"target=/dev/ipu{i}{s}" for i in (2, 3) for s in ("", "_ex", "_mailbox", "_mem")]


def test_cdi_prints_the_spec_of_the_nodes(board: RunningDaemon) -> None:
    spec = json.loads(ipufs("cdi", "--dev", str(board.mountpoint), "--prefix", "b"))
    assert spec["kind"] == "graphcore.ai/ipu"
    assert [d["name"] for d in spec["devices"]] == ["b-0", "b-1", "b-2", "b-3", "b-all"]
    assert spec["devices"][2]["containerEdits"]["mounts"][3] == {
        "hostPath": f"{board.mountpoint}/ipu2_mem", "containerPath": "/dev/ipu2_mem", "options": ["bind", "rw"]}


def test_control_channel_answers_and_refuses_clearly(board: RunningDaemon) -> None:
    path = os.getxattr(board.mountpoint, "user.ipufs.control").decode()
    assert os.stat(path).st_mode & 0o777 == 0o660
    with Control(path) as control:
        status = control.request("status")
        assert status["profile"] == "ipu2" and len(status["ipus"]) == 4
        with pytest.raises(Exception, match="unknown op"):
            control.request("explode")
        with pytest.raises(Exception, match="ipu must be"):
            control.request("ipu", ipu=9)
        assert control.request("ipu", ipu=0)["reset_count"] == 0  # still serving


@pytest.mark.parametrize("command", ["mount", "umount", "doctor", "ls", "info", "monitor", "reset", "docker", "cdi"])
def test_every_command_has_help(command: str) -> None:
    assert "usage: ipufs" in ipufs(command, "--help")


def test_dev_links_are_made_kept_away_from_strangers_and_removed(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "ipu1").write_text("a real device")  # not ours: untouched
    os.symlink("/etc/hostname", dev / "ipu0_mem")  # a stranger's link: untouched
    os.symlink("/gone/away/ipu1_ex", dev / "ipu1_ex")  # a crashed daemon's: replaced
    os.symlink("/gone/away/ipu7", dev / "ipu7")  # stale and beyond our IPUs: cleared
    mnt = tmp_path / "mnt"
    with running_daemon(mnt, ipus=2, profile="ipu1", link_dev=True, dev_dir=str(dev)) as d:
        assert os.readlink(dev / "ipu0") == str(mnt / "ipu0")
        assert os.readlink(dev / "ipu1_ex") == str(mnt / "ipu1_ex")
        assert (dev / "ipu1").read_text() == "a real device"
        assert os.readlink(dev / "ipu0_mem") == "/etc/hostname"
        assert not os.path.lexists(dev / "ipu7")
        assert sorted(d.daemon.links.refused) == ["ipu0_mem", "ipu1"]  # type: ignore[union-attr]
        with Device(0, dev) as device:  # a tool that hard-codes DIR/ipu0
            assert device.read_register("VENDOR_ID") == 0x1D95
    assert sorted(os.listdir(dev)) == ["ipu0_mem", "ipu1"]


def test_a_second_mount_may_not_take_a_live_mounts_cdi_names(board: RunningDaemon, tmp_path: Path) -> None:
    from ipufs.container import cdi

    cdi_dir = tmp_path / "cdi"
    cdi.SpecFile(cdi_dir, str(board.mountpoint), range(4), "b").write()
    refused = subprocess.run(ipufs_command("mount", str(tmp_path / "second"), "--ipus", "1", "--no-link-dev",
                                           "--cdi-dir", str(cdi_dir), "--cdi-prefix", "b"),
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == (
        f"ipufs mount: CDI names graphcore.ai/ipu=b-N are taken by the mount at {board.mountpoint} "
        f"({cdi_dir}/graphcore.ai-ipu_b.json): give this mount another --cdi-prefix, or --no-cdi")
    assert not is_mounted(tmp_path / "second")
    with running_daemon(tmp_path / "third", ipus=1, cdi_dir=str(cdi_dir)) as third:  # prefix "third"
        assert sorted(p.name for p in cdi_dir.iterdir()) == ["graphcore.ai-ipu_b.json", "graphcore.ai-ipu_third.json"]
        assert third.daemon.cdi is not None
    assert cdi.owner(cdi_dir / "graphcore.ai-ipu_b.json") == str(board.mountpoint)
