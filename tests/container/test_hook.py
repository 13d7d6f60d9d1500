# The CDI hook makes its links inside the container's root whatever is done
# to the tree meanwhile: a process swaps the container's /dev for a
# symbolic link to a directory outside, and back, as fast as it can while
# the hook runs again and again; no link ever lands outside. A root path
# that itself goes through a symbolic link (the host's) is fine.
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ipufs.container import hook

RACE_SECONDS = 3.0
#: Swaps DIR/dev between a directory and a link to OUTSIDE until killed.
SWAPPER = """
import os, sys
rootfs, outside = sys.argv[1:]
os.chdir(rootfs)
while True:
    os.rename("dev", "dev.real")
    os.symlink(outside, "dev")
    os.unlink("dev")
    os.rename("dev.real", "dev")
"""


def bundle(where: Path, root: str = "rootfs") -> str:
    """A bundle whose config.json names ``root``; the OCI state naming it."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps({"root": {"path": root}}))
    return json.dumps({"bundle": str(where)})


def run_hook(state: str, *links: str) -> tuple[int, str]:
    err = io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        status = hook.main(list(links), io.StringIO(state))
    finally:
        sys.stderr = saved
    return status, err.getvalue()


def test_swapping_dev_for_a_link_never_puts_a_link_outside(tmp_path: Path) -> None:
    rootfs, outside = tmp_path / "rootfs", tmp_path / "outside"
    (rootfs / "dev").mkdir(parents=True)
    outside.mkdir()
    state = bundle(tmp_path)
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(rootfs), str(outside)])
    made = refused = 0
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline and not any(outside.iterdir()):
            status, _ = run_hook(state, f"/dev/ipu{made + refused}=/run/ipufs-follow/mount/ipu0")
            made, refused = made + (status == 0), refused + (status != 0)
    finally:
        swapper.kill()
        swapper.wait()
    escaped = sorted(p.name for p in outside.iterdir())
    assert not escaped, f"links outside the root after {made + refused} runs: {escaped}"
    assert made and refused, (made, refused)  # the race ran both ways
    real = rootfs / "dev" if (rootfs / "dev").is_dir() and not (rootfs / "dev").is_symlink() else rootfs / "dev.real"
    assert len(list(real.iterdir())) == made


def test_a_root_path_through_a_symbolic_link_is_fine(tmp_path: Path) -> None:
    (tmp_path / "storage" / "rootfs" / "dev").mkdir(parents=True)
    (tmp_path / "lib").symlink_to(tmp_path / "storage")
    state = bundle(tmp_path / "bundle", str(tmp_path / "lib" / "rootfs"))
    status, err = run_hook(state, "/dev/ipu0=/run/ipufs-follow/mount/ipu0")
    assert status == 0, err
    assert os.readlink(tmp_path / "storage" / "rootfs" / "dev" / "ipu0") == "/run/ipufs-follow/mount/ipu0"


def test_a_link_in_the_container_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rootfs" / "sys").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "rootfs" / "dev").symlink_to(tmp_path / "elsewhere")
    status, err = run_hook(bundle(tmp_path), "/dev/ipu0=/x", "/sys/bus/pci/devices/0000:1a:00.0=/y")
    assert status == 1 and err == "ipufs cdi-hook: refusing to link /dev/ipu0: dev is a symbolic link " \
                                  "(or not a directory) in the container\n"
    assert not any((tmp_path / "elsewhere").iterdir())
    for link in ("/dev/./ipu0", "/dev//ipu0", "/dev/../etc/ipu0"):
        status, err = run_hook(bundle(tmp_path), f"{link}=/x")
        assert status == 1 and "links go in /dev/ or /sys/bus/pci/devices/" in err, err
