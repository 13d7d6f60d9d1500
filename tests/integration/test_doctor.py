# `ipufs doctor` through the real CLI: its probe mount says what a real
# mount of this machine gets (passthrough or not), and it lists a live
# mount beside it with that mount's mode.
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.harness import ipufs_command, running_daemon

pytestmark = pytest.mark.mount


def test_the_probe_agrees_with_a_real_mount_and_lists_it(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    with running_daemon(mnt, ipus=1, profile="ipu1") as d:
        mode = os.getxattr(d.mountpoint, "user.ipufs.mode").decode()
        out = subprocess.run(ipufs_command("doctor", "--json"), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        probe = {c["check"]: c for c in report["checks"]}["passthrough"]
        assert probe["ok"] == (mode == "passthrough"), probe
        assert report["passthrough_possible"] == (mode == "passthrough")
        listed = {m["mountpoint"]: m for m in report["mounts"]}[str(mnt)]
        assert listed["alive"] and listed["mode"] == mode
