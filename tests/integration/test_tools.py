# The gc-style tools against a real mount, run as a user would run them.
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs import compat
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


def test_ls_numbers_groups_as_graphcore_does_on_c600_cards(tmp_path: Path) -> None:
    # "device ID 12 corresponds to the four IPUs numbered 0 to 3" in an
    # 8-IPU C600 system (docs.graphcore.ai, C600 PCIe Device IDs): pairs
    # 8..11 first, then the fours 12, 13, then the eight 14.
    with running_daemon(tmp_path / "mnt", ipus=8, profile="ipu21", group_size=8) as d:
        devices = json.loads(ipufs("ls", "--json", "--dev", str(d.mountpoint)))["devices"]
    groups = {g["id"]: g["members"] for g in devices if g["type"] == "Multi IPU"}
    assert groups[8] == [0, 1] and groups[11] == [6, 7]
    assert groups[12] == [0, 1, 2, 3] and groups[13] == [4, 5, 6, 7] and groups[14] == list(range(8))


#: The keys of Graphcore's C600 `gc-info -i -d 0` sample, in its order
#: (docs.graphcore.ai, command-line tools, "Device attributes"), that
#: ipufs prints, with "process start time" where Graphcore's C2 sample has
#: it (the attached process's; docs/tools.md).
C600_KEYS = [
    "id", "target", "average board temp", "average die temp", "board ipu index", "board serial number",
    "board type", "board variant", "clock", "driver version", "firmware major version",
    "firmware minor version", "firmware patch version", "firmware version", "hexoatt active size (bytes)",
    "hexoatt total size (bytes)", "hexopt active size (bytes)", "hexopt total size (bytes)",
    "icu bootloader version", "ipu architecture", "ipu error state", "ipu power", "ipu utilisation",
    "ipu utilisation (session)", "link correctable error count", "link correctable error count (session)",
    "link speed", "link width", "numa node", "parity error count threshold", "parity error threshold interval",
    "parity initialised", "pci id", "pcie physical slot", "process start time", "remote buffers supported",
    "sysfs file id", "total board power", "user executable", "user name", "user process id",
]


def _device_info(text: str) -> list[dict[str, str]]:
    """Parse gc-info's layout strictly: "Device Info:", then "  key: value"."""
    devices: list[dict[str, str]] = []
    for line in text.splitlines():
        if line == "Device Info:":
            devices.append({})
            continue
        assert line.startswith("  ") and not line.startswith("   ") and ": " in line, line
        key, value = line[2:].split(": ", 1)
        devices[-1][key] = value
    return devices


def test_info_is_shaped_like_gc_info(board: RunningDaemon) -> None:
    [fields] = _device_info(ipufs("info", "-d", "2", "--dev", str(board.mountpoint)))
    assert list(fields) == [k for k in C600_KEYS if not k.startswith("user ") and k != "process start time"]
    assert fields["id"] == "2" and fields["target"] == "Fabric"  # an IPU-Machine's, as Graphcore's M2000 sample
    assert fields["board type"] == "M2000" and fields["board ipu index"] == "2"
    assert re.fullmatch(r"\d{4}\.\d{4}\.\d{6}", fields["board serial number"])  # 0063.0063.822391
    assert fields["ipu architecture"] == "ipu2" and fields["ipu error state"] == "no errors"
    assert fields["firmware version"] == "2.5.9" and fields["icu bootloader version"] == "1.0.4"
    assert (fields["firmware major version"], fields["firmware minor version"],
            fields["firmware patch version"]) == ("2", "5", "9")
    assert fields["link speed"] == "16.0 GT/s" and fields["clock"] == "1330MHz"
    assert fields["total board power"] == "150.0 W" and fields["pci id"] == "0000:1c:00.0"
    assert fields["hexopt total size (bytes)"] == str(64 << 20) and fields["ipu power"] == "12.60W"
    assert fields["ipu utilisation"] == "0.00%" and fields["ipu utilisation (session)"] == "N/A"
    typed = json.loads(ipufs("info", "-d", "2", "--json", "--dev", str(board.mountpoint)))[0]
    assert typed["id"] == 2 and typed["average_die_temp_c"] == 45.0 and typed["clock_mhz"] == 1330
    assert typed["hexopt_total_size_bytes"] == 64 << 20 and typed["ipu_power_w"] == 12.6
    assert typed["board_serial_number"] == fields["board serial number"]


def test_a_multi_ipu_id_names_its_members(board: RunningDaemon) -> None:
    m = str(board.mountpoint)
    assert [d["id"] for d in _device_info(ipufs("info", "-d", "5", "--dev", m))] == ["2", "3"]
    assert ipufs("reset", "-d", "4", "--dev", m).splitlines() == [
        "IPU 0 reset (reset count 1)", "IPU 1 reset (reset count 1)"]
    assert ipufs("info", "--ipu-count", "--dev", m) == "4\n"
    assert ipufs("info", "--ipu-arch", "-d", "0", "--dev", m) == "ipu2\n"
    assert ipufs("info", "--tile-clock-speed", "-d", "6", "--dev", m) == "1330MHz\n" * 4


def test_hexopt_active_size_is_what_ipu_mem_holds(board: RunningDaemon) -> None:
    path = board.path("ipu1_mem")
    assert os.stat(path).st_blocks == 0  # a fresh BAR holds nothing
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, b"x" * 8192, 1 << 20)
    finally:
        os.close(fd)
    held = int(_device_info(ipufs("info", "-d", "1", "--dev", str(board.mountpoint)))[0]
               ["hexopt active size (bytes)"])
    assert held == 8192 and os.stat(path).st_size == 64 << 20


def test_info_during_an_icu_timeout_says_what_the_registers_know(board: RunningDaemon) -> None:
    ipufs("inject", "--dev", str(board.mountpoint), "-d", "0", "icu-timeout")
    [fields] = _device_info(ipufs("info", "-d", "0", "--dev", str(board.mountpoint)))
    assert fields["total board power"] == "N/A" and fields["average board temp"] == "N/A"
    assert fields["firmware version"] == "2.5.9" and fields["average die temp"] == "45.0 C"


def test_info_and_monitor_show_the_attached_process(board: RunningDaemon) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from ipufs.client import Device, SignalReceiver\n"
         "s = SignalReceiver(); d = Device(1, sys.argv[1]); d.attach(); print('ok', flush=True); sys.stdin.read()",
         str(board.mountpoint)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        [fields] = _device_info(ipufs("info", "-d", "1", "--dev", str(board.mountpoint)))
        assert list(fields) == C600_KEYS
        assert fields["user process id"] == str(holder.pid) and fields["user name"] == "root"
        assert fields["user executable"].startswith("python")
        # Attached, with no tile running: none of the session's tile-time was busy
        # (as the C600 sample shows for an attached host-traffic test).
        assert fields["ipu utilisation (session)"] == "0.00%" and fields["ipu utilisation"] == "0.00%"
        info = json.loads(ipufs("info", "-d", "1", "--json", "--dev", str(board.mountpoint)))[0]
        assert info["user_process_id"] == holder.pid
        rows = json.loads(ipufs("monitor", "--json", "--dev", str(board.mountpoint)))["ipus"]
        assert [r["pid"] for r in rows] == [None, holder.pid, None, None]
        assert rows[1]["command"] == "python" or rows[1]["command"].startswith("python")
        text = ipufs("monitor", "--dev", str(board.mountpoint))
        assert f" {holder.pid} " in text and "1330MHz" in text
    finally:
        holder.kill()
        holder.communicate()


def test_monitor_prints_card_and_process_tables_once(board: RunningDaemon) -> None:
    text = ipufs("monitor", "--dev", str(board.mountpoint))  # not a terminal: no escapes, one snapshot
    assert "\033" not in text
    lines = text.splitlines()
    assert all(line[0] in "+|" for line in lines)
    head = [c.strip() for c in lines[1].strip("|").split("|")]
    assert head[:5] == ["Serial #", "ICU FW", "Type", "ID", "PCIe ID"]
    assert sum(1 for line in lines if "0000:1a:00.0" in line) == 1
    bare = ipufs("monitor", "--no-card-info", "--dev", str(board.mountpoint))
    assert "Serial #" not in bare and "PID" in bare


def test_reset_resets_the_device(board: RunningDaemon) -> None:
    assert ipufs("reset", "-d", "3", "--dev", str(board.mountpoint)).strip() == "IPU 3 reset (reset count 1)"
    assert board.daemon.devices.ipus[3].reset_count == 1


def test_docker_echo_binds_the_nodes_the_sysfs_view_and_the_library(board: RunningDaemon) -> None:
    m = board.mountpoint
    out = ipufs("docker", "--device-id", "0", "--device-id", "2", "--echo", "--dev", str(m),
                "--", "-ti", "graphcore/tools", "gc-inventory")
    library = compat.library_path()
    expected = ["docker run",
                "--mount type=tmpfs,destination=/sys/bus/pci/devices,tmpfs-mode=755",
                f"--mount type=bind,source={library},target=/usr/lib/ipufs/libipufs-compat.so,readonly"]
    for i, address in ((0, "0000:1a:00.0"), (2, "0000:1c:00.0")):
        expected += [f"--mount type=bind,source={m}/ipu{i}{s},target=/dev/ipu{i}{s}"
                     for s in ("", "_ex", "_mailbox", "_mem")]
        expected.append(f"--mount type=bind,source={m}/sys/devices/pci{address[:7]}/{address},"
                        f"target=/sys/bus/pci/devices/{address},readonly")
    expected += ["--env LD_PRELOAD=/usr/lib/ipufs/libipufs-compat.so", "-ti graphcore/tools gc-inventory"]
    # One option a line, continued as a shell continues it.
    assert out.rstrip("\n").split(" \\\n    ") == expected
    podman = ipufs("docker", "--all", "--echo", "--engine", "podman", "--no-cdi", "--dev", str(m), "--", "img")
    assert podman.count("--mount") == 2 + 4 * 5
    assert "--mount type=tmpfs,destination=/sys/bus/pci/devices,tmpfs-mode=755,notmpcopyup" in podman
    # No ids: every IPU, as gc-docker; a multi-IPU id of `ipufs ls`: its members.
    assert ipufs("docker", "--echo", "--no-cdi", "--dev", str(m), "--", "img").count("--mount") == 2 + 4 * 5
    group = shlex.split(ipufs("docker", "--echo", "--device-id", "5", "--dev", str(m), "--", "img").replace("\\\n", ""))
    assert [a.split(",")[2] for a in group if a.startswith("type=bind")][1:] == [
        f"target={t}" for i, a in ((2, "0000:1c:00.0"), (3, "0000:1d:00.0"))
        for t in [*(f"/dev/ipu{i}{s}" for s in ("", "_ex", "_mailbox", "_mem")), f"/sys/bus/pci/devices/{a}"]]


def test_cdi_prints_the_spec_of_the_nodes(board: RunningDaemon) -> None:
    spec = json.loads(ipufs("cdi", "--dev", str(board.mountpoint), "--prefix", "b"))
    assert spec["kind"] == "graphcore.ai/ipu"
    assert [d["name"] for d in spec["devices"]] == ["b-0", "b-1", "b-2", "b-3", "b-all"]
    assert spec["devices"][2]["containerEdits"]["mounts"][3:] == [
        {"hostPath": f"{board.mountpoint}/ipu2_mem", "containerPath": "/dev/ipu2_mem", "options": ["bind", "rw"]},
        {"hostPath": f"{board.mountpoint}/sys/devices/pci0000:1c/0000:1c:00.0",
         "containerPath": "/sys/bus/pci/devices/0000:1c:00.0", "options": ["bind", "ro"]}]
    assert spec["containerEdits"]["env"] == ["LD_PRELOAD=/usr/lib/ipufs/libipufs-compat.so"]


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


def test_the_installed_command_runs() -> None:
    # Every command's help: tests/test_cli.py, from the parser.
    assert "usage: ipufs" in ipufs("--help")


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
