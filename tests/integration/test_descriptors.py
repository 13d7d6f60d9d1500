# 128 IPUs under the usual soft limit of 1024 open files: the daemon raises
# its soft limit to the hard one and serves; with a hard limit too low, it
# refuses in one line naming what the IPUs need (docs/systemd.md).
from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

from ipufs.daemon import descriptors
from tests.integration.harness import ipufs_command, stop_processes, wait_for

pytestmark = pytest.mark.mount

IPUS = 128


def mount(mountpoint: Path, soft: int, hard: int) -> subprocess.Popen[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.Popen(ipufs_command("mount", str(mountpoint), "--ipus", str(IPUS), "--profile", "ipu1",
                                          "--no-link-dev", "--no-cdi"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=limit)


def soft_limit(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        return int(next(line for line in f if line.startswith("Max open files")).split()[3])


def test_128_ipus_under_the_usual_soft_limit_are_served(tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    hard = descriptors.needed(IPUS) + 100
    proc = mount(mountpoint, 1024, hard)
    try:
        def serving() -> bool:
            try:
                return os.getxattr(mountpoint, "user.ipufs.pid") == str(proc.pid).encode()
            except OSError:
                return proc.poll() is not None

        assert wait_for(serving, 120) and proc.poll() is None, proc.communicate()[1]
        assert soft_limit(proc.pid) == hard
        assert (mountpoint / f"ipu{IPUS - 1}_ex").exists()
    finally:
        stop_processes(mountpoint, proc)


def test_a_hard_limit_too_low_is_named_in_one_line(tmp_path: Path) -> None:
    proc = mount(tmp_path / "mnt", 1024, 1024)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        stop_processes(tmp_path / "mnt", proc)
    need = descriptors.needed(IPUS)
    assert (proc.returncode, stderr) == (1, f"ipufs mount: {IPUS} IPUs need {need} file descriptors "
                                            f"({descriptors.BASE} + {descriptors.PER_IPU} per IPU), but the limit "
                                            f"on open files is 1024: raise it (`ulimit -n {need}` as root, or "
                                            f"LimitNOFILE={need} in the systemd unit)\n")
