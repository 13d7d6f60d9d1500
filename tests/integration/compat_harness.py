# Running `ipufs run` from tests: as root, or as an unprivileged user (nobody)
# in a mount namespace of its own where /dev/fuse is open to users (the host's
# /dev/fuse is never touched), and C programs built where that user can run
# them.
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.harness import MOUNT_TIMEOUT, ROOT

NOBODY = 65534


@contextmanager
def public_dir() -> Iterator[Path]:
    """A directory any user may read (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="ipufs-test-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def build(source: str, out: Path) -> Path:
    binary = out / Path(source).stem.replace("_", "-")
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(ROOT / "tests" / "c" / source)],
                   check=True)
    return binary


#: Where user nobody sees this checkout: the checkout may lie in a directory
#: only root may enter (a CI clone in a 0700 temporary directory), so the
#: unprivileged command runs in a mount namespace of its own in which the
#: checkout is also bound here, a directory anyone may enter.
PUBLIC_ROOT = Path(tempfile.gettempdir()) / f"ipufs-public-{os.getpid()}"


#: What the unprivileged command's namespace is set up with, as root, before
#: it drops to nobody: /dev/fuse open to users, as most distributions ship
#: it, by a node of its own (made on a tmpfs mounted at PUBLIC_ROOT for the
#: moment, then bound over /dev/fuse) so that the host's /dev/fuse keeps its
#: mode whatever the host's is, and two runs at once cannot undo each other;
#: then the checkout bound at PUBLIC_ROOT. Everything lives in the namespace,
#: which ends with its last process however that ends (even SIGKILL).
NAMESPACE_SETUP = (
    'mount -t tmpfs -o mode=0700,size=16k ipufs-test-fuse "$1" && mknod -m 0666 "$1/fuse" c "$2" "$3" '
    '&& mount --bind "$1/fuse" /dev/fuse && umount "$1" && mount --bind "$0" "$1" && shift 3 && exec "$@"'
)


def unprivileged_python(uid: int = NOBODY, groups: tuple[int, ...] = ()) -> list[str]:
    """How user ``uid`` (nobody), with supplementary ``groups`` (none),
    runs ipufs: in a private mount namespace where /dev/fuse is open to
    users (NAMESPACE_SETUP) and this checkout (and its .venv) is also at
    PUBLIC_ROOT, this interpreter if the user may run it, else the
    system's python3 of the same version, with the checkout's import
    path."""
    if not shutil.which("setpriv") or not shutil.which("unshare"):
        pytest.skip("needs setpriv and unshare (util-linux)")
    if not PUBLIC_ROOT.exists():
        PUBLIC_ROOT.mkdir(mode=0o755)
        PUBLIC_ROOT.chmod(0o755)  # whatever the umask
        atexit.register(PUBLIC_ROOT.rmdir)  # empty: only namespaces of its own bind onto it

    def public(path: str) -> str:
        return str(PUBLIC_ROOT / Path(path).relative_to(ROOT)) if Path(path).is_relative_to(ROOT) else path

    fuse = os.stat("/dev/fuse").st_rdev
    bind = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SETUP, str(ROOT), str(PUBLIC_ROOT),
            str(os.major(fuse)), str(os.minor(fuse))]
    joined = [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", *joined, "env", "HOME=/tmp"]
    path = os.pathsep.join([str(PUBLIC_ROOT), *[public(p) for p in sys.path if p.endswith("site-packages")]])
    for python in (public(sys.executable), "/usr/bin/python3"):
        prefix = [*bind, *drop, f"PYTHONPATH={path}", python]
        probe = [*prefix, "-c",
                 f"import sys, ipufs.native; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return prefix
    pytest.skip("no Python that user nobody may run has ipufs on its path")


class Run:
    """One `ipufs run ... -- COMMAND` process, read line by line."""

    def __init__(self, args: list[str], command: list[str], *, user: bool = False) -> None:
        prefix = unprivileged_python() if user else [sys.executable]
        self.proc = subprocess.Popen([*prefix, "-m", "ipufs", "run", *args, "--", *command],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def line(self, timeout: float = MOUNT_TIMEOUT) -> str:
        assert self.proc.stdout is not None
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        t.start()
        t.join(timeout)
        if not box or not box[0]:
            self.proc.kill()
            raise AssertionError(f"no line from ipufs run: {self.finish()[1]}")
        return box[0].rstrip("\n")

    def until(self, prefix: str) -> list[str]:
        """Lines up to and including the first that starts with ``prefix``."""
        lines = [self.line()]
        while not lines[-1].startswith(prefix):
            lines.append(self.line())
        return lines

    def finish(self, timeout: float = MOUNT_TIMEOUT) -> tuple[int, str]:
        """Wait for the end; returns (status, the rest of stderr)."""
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()
