# Which paths the compatibility library sends into a sysfs view: those
# under /sys/bus/pci/devices, and only while they stay there. A path whose
# ".." climb out of it (/sys/bus/pci/devices/../../../class) is the host's,
# as it would be in sysfs; one that climbs out and back in is the view's.
# Checked through libc from C (tests/c/sysfs_paths.c) and from Python.
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs import compat
from tests.integration.compat_harness import build
from tests.integration.harness import TIMEOUT, running_daemon

pytestmark = pytest.mark.mount

DEVICES = "/sys/bus/pci/devices"


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A mount with two IPUs, and an environment whose library shows its
    view at /sys/bus/pci/devices."""
    with running_daemon(tmp_path_factory.mktemp("paths") / "mnt", ipus=2, profile="ipu1") as d:
        where = compat.sysfs_view(d.mountpoint)
        yield where, {**compat.preload(dict(os.environ)), compat.SYSFS_ENV: str(where)}


def test_paths_that_climb_out_of_the_view_are_the_hosts_from_c(
        view: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    where, env = view
    program = build("sysfs_paths.c", tmp_path)
    direct = f"{DEVICES}/0000:1b:00.0"
    paths = [f"{DEVICES}/../../../class", f"{DEVICES}/..", f"{DEVICES}/../devices/0000:1b:00.0",
             f"{DEVICES}/0000:1b:00.0/../0000:1b:00.0", direct]
    out = subprocess.run([str(program), *paths], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    lines = out.stdout.splitlines()
    # Where the view's entry resolves to (the view itself, or its target
    # if the entry is a link), as the library shows it.
    shown = lines[-1].split()[-1]
    assert lines == [
        f"access {paths[0]} {'0' if os.path.exists('/sys/class') else 'ENOENT'}",
        f"realpath {paths[0]} /sys/class",
        f"access {paths[1]} 0",
        f"realpath {paths[1]} /sys/bus/pci",  # not a directory inside the mount
        f"access {paths[2]} 0",  # out and back in: the view's
        f"realpath {paths[2]} {shown}",
        f"access {paths[3]} 0",
        f"realpath {paths[3]} {shown}",
        f"access {direct} 0",
        f"realpath {direct} {shown}",
    ], out.stderr
    assert str(where) not in out.stdout


def test_paths_that_climb_out_of_the_view_are_the_hosts_from_python(view: tuple[Path, dict[str, str]]) -> None:
    _, env = view
    script = (
        "import os, sys\nd = sys.argv[1]\n"
        "print(os.access(d + '/../../../class', os.F_OK))\n"
        "print(os.stat(d + '/..').st_ino == os.stat('/sys/bus/pci').st_ino)\n"
        "print(sorted(os.listdir(d + '/../devices')))\n"
        "print(open(d + '/../devices/0000:1b:00.0/file_name').read())\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", script, DEVICES], env=env, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.stdout.splitlines() == [str(os.path.exists("/sys/class")), "True",
                                       "['0000:1a:00.0', '0000:1b:00.0']", "1"], out.stderr
