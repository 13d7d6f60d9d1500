# An image cannot run code on the host through ipufs's CDI hook. The
# runtime runs the createContainer hook as root with the container's root
# filesystem as its working directory (OCI runtime spec), so an image that
# ships an `ipufs` package or a module ipufs imports would run as root on
# the host if the hook imported from there. Here an image planting such
# modules, each writing a marker file on the host when imported, runs
# through real runc and real podman (in the engine space) with the hook of
# a following spec: the hook makes its links and no marker appears.
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.container import follow
from tests.integration.engines import EngineSpace, busybox_rootfs, missing_tools
from tests.integration.harness import ROOT, wait_for

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(bool(missing_tools()), reason=f"container engines not installed "
                                 f"(missing {', '.join(missing_tools())}; .ci/run installs them)")]
HOSTILE = "ipufs-hostile:1"
#: Modules the interpreter or ipufs would import from the working
#: directory if it were on sys.path.
PLANTED = ("ipufs/__init__.py", "ipufs/__main__.py", "ipufs/cli.py", "argparse.py", "json.py", "logging/__init__.py",
           "sitecustomize.py", "usercustomize.py", "runpy.py", "importlib/__init__.py")


def hostile_rootfs(out: Path, marker: Path) -> Path:
    """Busybox, plus PLANTED modules that append their name to ``marker``."""
    rootfs = busybox_rootfs(out, ("sh", "ls", "readlink"))
    for name in PLANTED:
        (rootfs / name).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / name).write_text(f"with open({str(marker)!r}, 'a') as f:\n    f.write({name!r} + '\\n')\n")
    return rootfs


def test_runc_runs_the_hook_without_the_images_code(tmp_path: Path) -> None:
    marker = tmp_path / "planted-code-ran"
    bundle = tmp_path / "bundle"
    hostile_rootfs(bundle, marker)
    subprocess.run(["runc", "spec"], cwd=bundle, check=True)
    config = json.loads((bundle / "config.json").read_text())
    config["process"]["terminal"] = False
    config["process"]["args"] = ["readlink", "/dev/ipu0"]
    config["root"] = {"path": "rootfs", "readonly": False}
    config["hooks"] = {"createContainer": [follow.hook(["/dev/ipu0=/run/ipufs-follow/mount/ipu0"])]}
    (bundle / "config.json").write_text(json.dumps(config))
    state, name = tmp_path / "runc-state", f"ipufs-hostile-{os.getpid()}"
    try:
        out = subprocess.run(["runc", "--root", str(state), "run", "--bundle", str(bundle), name],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert not marker.exists(), f"the image's code ran on the host: {marker.read_text()}"
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "/run/ipufs-follow/mount/ipu0"  # the hook ran, in the rootfs
    finally:
        subprocess.run(["runc", "--root", str(state), "delete", "--force", name], capture_output=True, timeout=60)


@pytest.fixture
def where(space: EngineSpace, tmp_path: Path) -> Iterator[Path]:
    with space.workdir(tmp_path.name) as where:
        yield where


def test_podman_runs_the_hook_without_the_images_code(space: EngineSpace, where: Path, tmp_path: Path) -> None:
    marker = tmp_path / "planted-code-ran"
    tar = subprocess.run(["tar", "-c", "-C", str(hostile_rootfs(tmp_path, marker)), "."], capture_output=True,
                         check=True).stdout
    subprocess.run(space.command(["podman", "import", "-", HOSTILE]), env=space.env, input=tar, capture_output=True,
                   timeout=120, check=True)
    mountpoint = where / "mnt"
    argv = [sys.executable, "-m", "ipufs", "mount", str(mountpoint), "--ipus", "1", "--no-link-dev",
            "--cdi-dir", str(space.cdi_dir), "--cdi-prefix", "h", "--cdi-follow-restarts"]
    daemon = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    spec = space.cdi_dir / "graphcore.ai-ipu_h.json"
    try:
        assert wait_for(lambda: spec.exists() or daemon.poll() is not None, 30) and spec.exists(), \
            daemon.stderr.read() if daemon.stderr else ""
        out = space.run(["podman", "run", "--rm", "--network", "none", "--device", "graphcore.ai/ipu=h-0",
                         HOSTILE, "sh", "-c", "readlink /dev/ipu0; ls /sys/bus/pci/devices"], check=False)
        assert not marker.exists(), f"the image's code ran on the host: {marker.read_text()}"
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["/run/ipufs-follow-h/mount/ipu0", "0000:1a:00.0"]
    finally:
        daemon.terminate()
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        if daemon.stderr is not None:
            daemon.stderr.close()
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
        space.run(["podman", "rmi", "-f", HOSTILE], check=False)
