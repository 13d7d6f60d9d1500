# The compatibility library under device-number reuse: the kernel gives a
# departed mount's anonymous device number (major 0) to the next superblock
# that needs one, so the library's answer to "is this an ipufs node?" must
# follow the mount, not the number (docs/compat.md). A long-running process
# with the library preloaded sees an ipufs mount go and a tmpfs take its
# number, and the reverse: on this kernel (unique mount ids), and where
# statx fails (the fallback of kernels without them, tests/c/without_statx.c).
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ipufs import compat
from tests.integration.compat_harness import build
from tests.integration.harness import TIMEOUT, LineClient, running_daemon

pytestmark = pytest.mark.mount

#: A process that stats what it is told, one path a line, and says what
#: libc's stat reported: its type, its rdev and its device number.
PROBE = (
    "import os, stat, sys\nprint('ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    if line.strip() == 'q': break\n"
    "    st = os.stat(line.strip())\n"
    "    kind = 'chr' if stat.S_ISCHR(st.st_mode) else 'reg' if stat.S_ISREG(st.st_mode) else 'other'\n"
    "    print(kind, f'{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}', st.st_dev, flush=True)\n"
)

#: How many times a scenario is tried before giving up on the kernel
#: reusing the number: other mounts made on the machine meanwhile may take
#: it first.
ATTEMPTS = 8


@pytest.fixture(scope="module", params=["unique mount ids", "without statx", "statx refused with EPERM"])
def prefix(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """How the probe is started: as it is, or where statx fails (ENOSYS,
    or EPERM as a container engine's seccomp profile may answer)."""
    if request.param == "unique mount ids":
        return []
    command = [str(build("without_statx.c", tmp_path_factory.mktemp("c")))]
    return command + ["--eperm"] if "EPERM" in request.param else command


@contextmanager
def probe(prefix: list[str]) -> Iterator[Callable[[Path], tuple[str, str, int]]]:
    client = LineClient([*prefix, sys.executable, "-I", "-c", PROBE], "ready",
                        env=compat.preload(dict(os.environ)))
    try:
        def ask(path: Path) -> tuple[str, str, int]:
            kind, rdev, dev = client.ask(str(path)).split()
            return kind, rdev, int(dev)
        yield ask
    finally:
        client.close()


@contextmanager
def tmpfs(where: Path) -> Iterator[Path]:
    """A fresh tmpfs at ``where`` holding one file, ``a``: its first, so
    that its inode number (2) is that of a node (ipu0)."""
    where.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "ipufs-test", str(where)], check=True,
                   timeout=TIMEOUT)
    try:
        (where / "a").write_bytes(b"plain")
        yield where / "a"
    finally:
        subprocess.run(["umount", str(where)], timeout=TIMEOUT)


def test_a_file_on_a_tmpfs_that_took_a_departed_mounts_number_stays_a_regular_file(tmp_path: Path, prefix: list[str]) -> None:
    with probe(prefix) as stat_of:
        for attempt in range(ATTEMPTS):
            with running_daemon(tmp_path / f"mnt{attempt}", ipus=1, profile="ipu1") as d:
                kind, rdev, ipufs_dev = stat_of(d.mountpoint / "ipu0")
                assert (kind, rdev) == ("chr", "240:0")
            with tmpfs(tmp_path / f"tmp{attempt}") as plain:
                assert os.stat(plain).st_ino == 2
                kind, rdev, dev = stat_of(plain)
                if dev != ipufs_dev:
                    continue  # another mount took the number first
                assert (kind, rdev) == ("reg", "0:0")
                return
    pytest.skip(f"the kernel did not reuse a device number in {ATTEMPTS} tries")


def test_a_node_of_a_mount_that_took_a_tmpfs_number_is_a_character_device(tmp_path: Path, prefix: list[str]) -> None:
    with probe(prefix) as stat_of:
        for attempt in range(ATTEMPTS):
            with tmpfs(tmp_path / f"tmp{attempt}") as plain:
                kind, _, tmpfs_dev = stat_of(plain)
                assert kind == "reg"
            with running_daemon(tmp_path / f"mnt{attempt}", ipus=1, profile="ipu1") as d:
                kind, rdev, dev = stat_of(d.mountpoint / "ipu0")
                if dev != tmpfs_dev:
                    continue
                assert (kind, rdev) == ("chr", "240:0")
                return
    pytest.skip(f"the kernel did not reuse a device number in {ATTEMPTS} tries")


def test_the_library_knows_the_daemons_largest_node_number() -> None:
    """The library checks only files whose inode number a node can have:
    its MAX_IPUS must be the daemon's."""
    from ipufs.daemon.config import MAX_IPUS
    from tests.integration.harness import ROOT

    source = (ROOT / "native" / "src" / "compat_nodes.c").read_text()
    assert f"#define MAX_IPUS {MAX_IPUS}\n" in source


def test_checking_a_file_leaves_errno_as_it_was(tmp_path: Path, prefix: list[str]) -> None:
    """The checks behind a successful stat of a file that could be a node
    (a statx refused with ENOSYS among them) do not show in errno."""
    script = ("import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              "buf = ctypes.create_string_buffer(256)\nctypes.set_errno(0)\n"
              "print(libc.stat(sys.argv[1].encode(), buf), ctypes.get_errno())\n")
    with tmpfs(tmp_path / "tmp") as plain:
        out = subprocess.run([*prefix, sys.executable, "-I", "-c", script, str(plain)],
                             env=compat.preload(dict(os.environ)), capture_output=True, text=True, timeout=TIMEOUT)
    assert out.stdout.split() == ["0", "0"], out.stderr


def test_stat_answers_are_the_kernels_field_for_field(tmp_path: Path, prefix: list[str]) -> None:
    """stat, lstat, fstatat and their 64-bit forms (which the library
    answers from one statx where it can) report every field of a file of
    another filesystem as the kernel's stat does, fail with its errno, and
    leave errno alone when they succeed: a regular file, a directory,
    links, missing paths, a character device, procfs, and the first file of
    a fresh tmpfs (inode number 2, which the library checks). That file
    comes before each other path, so that each is asked both ways: first
    right after a file that may be a node (one statx), then after one that
    may not (the kernel's stat)."""
    probe = build("stat_fields.c", tmp_path)
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_bytes(b"x" * 5000)
    (tmp_path / "link").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    paths = [tmp_path / "file", tmp_path / "dir", tmp_path / "link", tmp_path / "dangling", tmp_path / "nowhere",
             tmp_path / "file" / "below", Path("/dev/null"), Path("/proc/version")]
    with tmpfs(tmp_path / "tmp") as first:
        assert os.stat(first).st_ino == 2
        command = [*prefix, str(probe), *(str(p) for path in paths for p in (first, path))]
        here = tmp_path / "dir"  # the working directory, which the probe stats too: nothing changes it
        with_library = subprocess.run(command, env=compat.preload(dict(os.environ)), capture_output=True, text=True,
                                      timeout=TIMEOUT, cwd=here)
        without = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=here)
    assert with_library.returncode == without.returncode == 0, with_library.stderr + without.stderr
    assert with_library.stdout.splitlines() == without.stdout.splitlines()
    assert "stat no buffer errno 14" in without.stdout  # EFAULT, as the kernel says
