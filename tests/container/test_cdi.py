# The CDI spec as data, its names, and its file's life: written, replaced
# when stale, refused when a live other mount holds the names, removed.
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ipufs import compat
from ipufs.container import binds, cdi, cdi_edits
from ipufs.tools.docker import image_of


def test_a_device_per_ipu_and_all_made_of_its_binds_and_the_shared_edits_once() -> None:
    spec = cdi.spec("/run/ipufs", [0, 1], "")
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == "graphcore.ai/ipu"
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "all"]
    one = spec["devices"][1]["containerEdits"]
    assert one == {"mounts": [
        {"hostPath": "/run/ipufs/ipu1", "containerPath": "/dev/ipu1", "options": ["bind", "rw"]},
        {"hostPath": "/run/ipufs/ipu1_ex", "containerPath": "/dev/ipu1_ex", "options": ["bind", "rw"]},
        {"hostPath": "/run/ipufs/ipu1_mailbox", "containerPath": "/dev/ipu1_mailbox", "options": ["bind", "rw"]},
        {"hostPath": "/run/ipufs/ipu1_mem", "containerPath": "/dev/ipu1_mem", "options": ["bind", "rw"]},
        {"hostPath": "/run/ipufs/sys/devices/pci0000:1b/0000:1b:00.0",
         "containerPath": "/sys/bus/pci/devices/0000:1b:00.0", "options": ["bind", "ro"]}]}
    assert spec["devices"][2]["containerEdits"]["mounts"] == (
        spec["devices"][0]["containerEdits"]["mounts"] + one["mounts"])
    # Applied once, whichever devices are asked for: the empty directory
    # for the IPUs' sysfs directories, and the preloaded library.
    assert spec["containerEdits"] == {
        "env": ["LD_PRELOAD=/usr/lib/ipufs/libipufs-compat.so"],
        "mounts": [{"hostPath": "tmpfs", "containerPath": "/sys/bus/pci/devices", "type": "tmpfs",
                    "options": ["nosuid", "nodev", "noexec", "mode=755"]},
                   {"hostPath": str(compat.library_path()), "containerPath": "/usr/lib/ipufs/libipufs-compat.so",
                    "options": ["bind", "ro"]}]}


def test_binds_are_the_same_description_for_every_consumer() -> None:
    edits = binds.edits("/m", [3])
    assert edits.tmpfs == (binds.Tmpfs("/sys/bus/pci/devices"),)
    assert [(b.source, b.target, b.read_only) for b in edits.binds] == [
        (str(compat.library_path()), "/usr/lib/ipufs/libipufs-compat.so", True),
        ("/m/ipu3", "/dev/ipu3", False), ("/m/ipu3_ex", "/dev/ipu3_ex", False),
        ("/m/ipu3_mailbox", "/dev/ipu3_mailbox", False), ("/m/ipu3_mem", "/dev/ipu3_mem", False),
        ("/m/sys/devices/pci0000:1d/0000:1d:00.0", "/sys/bus/pci/devices/0000:1d:00.0", True)]
    assert edits.env == (("LD_PRELOAD", "/usr/lib/ipufs/libipufs-compat.so"),)
    # For binds only (a device plugin's answer): a host directory instead of the tmpfs.
    only_binds = binds.edits("/m", [3], devices_dir="/d/3")
    assert not only_binds.tmpfs
    assert only_binds.binds[0] == binds.Bind("/d/3", "/sys/bus/pci/devices", read_only=True)
    assert only_binds.binds[1:] == edits.binds and only_binds.env == edits.env


def test_only_the_default_mount_has_plain_names() -> None:
    assert cdi.default_prefix("/run/ipufs") == cdi.default_prefix("/run/ipufs/") == ""
    assert cdi.default_prefix("/run/ipufs-b") == "ipufs-b"
    assert cdi.default_prefix("/srv/my ipus") == "my_ipus"
    assert cdi.default_prefix("/srv/.hidden") == "ipufs.hidden"
    assert cdi_edits.device_name("b", 2) == "b-2" and cdi_edits.device_name("", "all") == "all"
    assert cdi.file_name("") == "graphcore.ai-ipu.json" and cdi.file_name("b") == "graphcore.ai-ipu_b.json"
    with pytest.raises(ValueError, match="CDI prefix"):
        cdi.check_prefix("a/b")


def test_the_file_is_written_replaced_and_removed(tmp_path: Path) -> None:
    gone = cdi.SpecFile(tmp_path, "/no/such/mount", [0], "old")
    gone.write()  # a crashed daemon's spec: its mount is not there
    mine = cdi.SpecFile(tmp_path, "/run/ipufs", [0, 1], "")
    (tmp_path / "other-vendor.json").write_text('{"kind": "example.com/x"}')
    mine.write()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graphcore.ai-ipu.json", "other-vendor.json"]
    assert json.loads(mine.path.read_text())["devices"][1]["name"] == "1"
    assert cdi.owner(mine.path) == "/run/ipufs"
    mine.write()  # a restart over its own file
    mine.remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-vendor.json"]


def test_a_spec_that_is_no_longer_ours_is_left_alone(tmp_path: Path) -> None:
    mine = cdi.SpecFile(tmp_path, "/run/a", [0], "x")
    mine.write()
    cdi.SpecFile(tmp_path, "/run/b", [0], "x").write()  # /run/a is no live mount: replaced
    mine.remove()
    assert cdi.owner(tmp_path / "graphcore.ai-ipu_x.json") == "/run/b"


def test_the_image_is_the_first_argument_no_option_takes() -> None:
    assert image_of(["-ti", "--rm", "-e", "A=1", "--name", "n", "img:1", "cmd", "-x"]) == "img:1"
    assert image_of(["--network=none", "-dit", "img"]) == "img"
    assert image_of(["--rm"]) is None


def test_a_following_spec_binds_the_holder_and_links_with_a_hook() -> None:
    from ipufs import self_command

    spec = cdi.spec("/srv/b", [0, 1], "b", follow=True)
    assert [d["name"] for d in spec["devices"]] == ["b-0", "b-1", "b-all"]
    one = spec["devices"][1]["containerEdits"]
    hook = self_command.argv("cdi-hook")  # isolated, by absolute paths: the image cannot plant code
    assert hook[:2] == [self_command.interpreter(), "-I"] and os.path.isabs(hook[0])
    assert one == {"hooks": [{"hookName": "createContainer", "path": hook[0], "env": [], "args": [
        *hook,
        "/dev/ipu1=/run/ipufs-follow-b/mount/ipu1", "/dev/ipu1_ex=/run/ipufs-follow-b/mount/ipu1_ex",
        "/dev/ipu1_mailbox=/run/ipufs-follow-b/mount/ipu1_mailbox", "/dev/ipu1_mem=/run/ipufs-follow-b/mount/ipu1_mem",
        "/sys/bus/pci/devices/0000:1b:00.0=/run/ipufs-follow-view-b/mount/sys/devices/pci0000:1b/0000:1b:00.0"]}]}
    every = spec["devices"][2]["containerEdits"]["hooks"][0]["args"]
    n = len(hook)
    assert every[n:] == spec["devices"][0]["containerEdits"]["hooks"][0]["args"][n:] + one["hooks"][0]["args"][n:]
    mounts = spec["containerEdits"]["mounts"]
    assert mounts[-2:] == [
        {"hostPath": "/srv/b.follow", "containerPath": "/run/ipufs-follow-b", "options": ["rbind", "rslave", "rw"]},
        {"hostPath": "/srv/b.follow", "containerPath": "/run/ipufs-follow-view-b",
         "options": ["rbind", "rslave", "ro"]}]
    assert mounts[0]["containerPath"] == "/sys/bus/pci/devices" and mounts[0]["type"] == "tmpfs"


def test_a_following_spec_file_knows_its_mount(tmp_path: Path) -> None:
    path = tmp_path / "graphcore.ai-ipu_b.json"
    path.write_text(json.dumps(cdi.spec("/srv/b", [0], "b", follow=True)))
    assert cdi.owner(path) == "/srv/b"
