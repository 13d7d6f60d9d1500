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


def test_nobody_is_told_root_gets_what_root_is_told(tmp_path: Path) -> None:
    """Root's mode is root's, whoever asks: nobody, who cannot probe, hears
    the same mode root's own doctor reports, and that page-cache mode is
    what nobody gets."""
    from tests.integration.compat_harness import PUBLIC_ROOT, unprivileged_python

    def run_as_root() -> str:
        out = subprocess.run(ipufs_command("doctor", "--json"), capture_output=True, text=True, timeout=60)
        return {f["check"]: f for f in json.loads(out.stdout)["run"]}["ipufs run as root"]["detail"]

    root_says = run_as_root()
    out = subprocess.run([*unprivileged_python(), "-m", "ipufs", "doctor", "--json"], capture_output=True,
                         text=True, timeout=60, cwd="/")
    assert out.returncode in (0, 1), out.stderr
    run = {f["check"]: f for f in json.loads(out.stdout)["run"]}
    assert PUBLIC_ROOT.exists()
    assert run["ipufs run as root"]["detail"].split()[0].rstrip(",") == root_says.split()[0].rstrip(",")
    assert "page-cache" in run["ipufs run as a user"]["detail"]
