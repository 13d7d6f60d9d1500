# Real container engines for the tests, kept off the host's: a dockerd with
# its own containerd, and podman, all started in one private mount namespace
# (the "engine space") that has tmpfs over /run and /var/lib, so whatever
# they write there (runtime state, sockets, podman's blob cache, the CDI
# directory /run/cdi that podman 4 reads) never reaches the host's, and
# their own data roots under a temporary directory. Tests mount ipufs under
# the space's anchor, a shared mount made before the namespace, so that the
# mounts propagate into it. close() ends every process left in the
# namespace and unmounts the anchor, whatever happened before.
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.harness import ROOT

IMAGE = "ipufs-test:1"
TOOLS = ("nsenter", "unshare", "dockerd", "containerd", "docker", "podman", "runc", "busybox")


def missing_tools() -> list[str]:
    """The programs the engine tests need and this machine lacks."""
    return [tool for tool in TOOLS if not shutil.which(tool)]


def build_rootfs(out: Path) -> Path:
    """A minimal root filesystem: static busybox as /bin/sh, a static build
    of native/src/ipu_client.c as /bin/ipu-client, and a dynamically linked
    build of tests/c/real_client.c (the unmodified client of the real
    driver, which needs the compatibility library preloaded) as
    /bin/real-client, with the host's loader and the libraries it needs."""
    rootfs = busybox_rootfs(out, ("sh", "ls", "cat", "sleep", "echo"))
    subprocess.run(["cc", "-static", "-O2", "-I", str(ROOT / "native" / "include"), "-o",
                    str(rootfs / "bin" / "ipu-client"), str(ROOT / "native" / "src" / "ipu_client.c")], check=True)
    real_client = rootfs / "bin" / "real-client"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(real_client),
                    str(ROOT / "tests" / "c" / "real_client.c")], check=True)
    copy_libraries(real_client, rootfs)
    return rootfs


def busybox_rootfs(out: Path, applets: tuple[str, ...]) -> Path:
    """OUT/rootfs: static busybox as /bin/busybox and ``applets``."""
    rootfs = out / "rootfs"
    for sub in ("bin", "dev", "proc", "sys", "tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    busybox = shutil.which("busybox")
    assert busybox is not None
    shutil.copy(busybox, rootfs / "bin" / "busybox")
    for applet in applets:
        os.symlink("busybox", rootfs / "bin" / applet)
    return rootfs


def copy_libraries(binary: Path, rootfs: Path) -> None:
    """Copy the shared libraries and loader ``binary`` needs (as ldd lists
    them) to the same paths in ``rootfs``."""
    listed = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    for line in listed.splitlines():
        words = line.split()
        path = words[2] if len(words) > 2 and words[1] == "=>" else words[0]
        if path.startswith("/"):
            target = rootfs / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(os.path.realpath(path), target)


class EngineSpace:
    """The private namespace the engines run in, and both engines."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.anchor = base / "anchor"
        self.cdi_dir = base / "cdi"
        self.holder: subprocess.Popen[bytes] | None = None
        self.ns = ""
        #: the namespace held open until close() has seen its processes
        #: end: a namespace's number is used again once it is gone, and
        #: the next one could be another test's (a run under pytest-xdist)
        self.ns_fd: int | None = None
        self.docker_sock = base / "docker.sock"
        self.env = dict(os.environ, DOCKER_HOST=f"unix://{self.docker_sock}",
                        CONTAINERS_CONF=str(base / "containers.conf"),
                        CONTAINERS_STORAGE_CONF=str(base / "storage.conf"))
        self.daemons: list[subprocess.Popen[bytes]] = []
        self.anchored = False

    # -- the namespace ----------------------------------------------------
    def open(self) -> None:
        for sub in ("anchor", "cdi", "podman-tmp"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(self.anchor), str(self.anchor)], check=True)
        self.anchored = True
        subprocess.run(["mount", "--make-shared", str(self.anchor)], check=True)
        script = ("mount -t tmpfs ipufs-engines /run && mount -t tmpfs ipufs-engines /var/lib && "
                  f"mkdir /run/cdi && mount --bind {self.cdi_dir} /run/cdi && echo ready && exec sleep infinity")
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", "sh", "-c", script],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"engine namespace failed: {self.holder.stderr.read() if self.holder.stderr else ''!r}")
        self.ns_fd = os.open(f"/proc/{self.holder.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        self.ns = os.readlink(f"/proc/self/fd/{self.ns_fd}")
        self._write_podman_config()
        self._start_docker()

    def command(self, argv: list[str]) -> list[str]:
        assert self.holder is not None
        return ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--wd=" + str(self.base), "--", *argv]

    def run(self, argv: list[str], timeout: float = 60, check: bool = True,
            input: bytes | None = None) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(self.command(argv), env=self.env, capture_output=True, timeout=timeout,
                             input=input.decode() if input is not None else None, text=True)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])}...: {out.returncode} {out.stderr.strip()}")
        return out

    @contextlib.contextmanager
    def workdir(self, name: str, holder: str = "mnt") -> Iterator[Path]:
        """ANCHOR/NAME, for a test's mounts (they propagate into the
        space); afterwards removed with what is mounted there, and the
        holder of a following mount at NAME/HOLDER (which outlives its
        daemons by design) unmounted."""
        from ipufs.container import follow

        where = self.anchor / name
        where.mkdir()
        try:
            yield where
        finally:
            subprocess.run(["umount", "-R", "-l", follow.holder_dir(str(where / holder))], capture_output=True)
            subprocess.run(["rm", "-rf", str(where)], check=True)

    def popen(self, argv: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(argv), env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ipufs(self, *args: str) -> list[str]:
        """The `ipufs` command, as a user in the namespace runs it."""
        return [sys.executable, "-m", "ipufs", *args]

    # -- the engines ------------------------------------------------------
    def _write_podman_config(self) -> None:
        b = self.base
        (b / "storage.conf").write_text(
            f'[storage]\ndriver = "vfs"\ngraphroot = "{b}/podman-graph"\nrunroot = "{b}/podman-run"\n')
        # runc, not crun (which fails on this cgroup layout); ulimits within
        # the machine's; no network.
        (b / "containers.conf").write_text(
            '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\nnetns = "none"\n'
            f'[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            f'events_logfile_path = "{b}/podman-events.log"\ntmp_dir = "{b}/podman-tmp"\n'
            f'static_dir = "{b}/podman-graph/libpod"\nvolume_path = "{b}/podman-graph/volumes"\n')

    def _start_docker(self) -> None:
        b = self.base
        (b / "containerd.toml").write_text("version = 2\n")
        (b / "daemon.json").write_text("{}\n")
        ctd_sock = b / "containerd.sock"
        self.daemons.append(self._daemon(
            ["containerd", "--config", str(b / "containerd.toml"), "--root", str(b / "containerd-root"),
             "--state", str(b / "containerd-state"), "--address", str(ctd_sock)], b / "containerd.log"))
        _wait(lambda: ctd_sock.exists(), 20, "containerd did not start")
        self.daemons.append(self._daemon(
            ["dockerd", "--config-file", str(b / "daemon.json"), "--containerd", str(ctd_sock),
             "--exec-opt", "native.cgroupdriver=cgroupfs", "--iptables=false", "--ip6tables=false",
             "--bridge=none", "--data-root", str(b / "docker-data"), "--exec-root", str(b / "docker-exec"),
             "--pidfile", str(b / "dockerd.pid"), "-H", f"unix://{self.docker_sock}"], b / "dockerd.log"))
        _wait(lambda: self.run(["docker", "version"], check=False).returncode == 0, 60,
              "dockerd did not start: see " + str(b / "dockerd.log"))

    def _daemon(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            return subprocess.Popen(self.command(argv), env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def import_image(self, rootfs: Path) -> None:
        tar = subprocess.run(["tar", "-c", "-C", str(rootfs), "."], capture_output=True, check=True).stdout
        for engine in ("docker", "podman"):
            out = subprocess.run(self.command([engine, "import", "-", IMAGE]), env=self.env, input=tar,
                                 capture_output=True, timeout=120)
            if out.returncode != 0:
                raise RuntimeError(f"{engine} import: {out.stderr.decode().strip()}")

    # -- the end ----------------------------------------------------------
    def _processes(self) -> list[int]:
        """Every process in the namespace (daemons, shims, containers)."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/mnt") == self.ns:
                        found.append(int(entry))
                except OSError:
                    pass
        return found

    def close(self) -> None:
        try:
            if self.ns:
                self.run(["sh", "-c", "docker ps -aq | xargs -r docker rm -f; podman rm -af -t 0"],
                         timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for proc in self.daemons:  # dockerd first: it stops its containers
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.daemons:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        try:
            if self.ns:
                for pid in self._processes():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                _wait(lambda: not self._processes(), 20, "processes in the engine namespace did not end")
        finally:
            if self.ns_fd is not None:
                os.close(self.ns_fd)
                self.ns_fd = None
        if self.holder is not None:
            self.holder.wait()
            for pipe in (self.holder.stdout, self.holder.stderr):
                if pipe is not None:
                    pipe.close()
        if self.anchored:  # (os.path.ismount cannot tell a bind within one filesystem)
            subprocess.run(["umount", "-l", str(self.anchor)], check=True)
            self.anchored = False


def _wait(predicate: object, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(message)
        time.sleep(0.1)


class Output:
    """Lines a process prints, read with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def line(self, timeout: float = 30) -> str:
        box: list[str] = []
        assert self.proc.stdout is not None
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        t.start()
        t.join(timeout)
        if not box:
            raise TimeoutError("no line within the timeout")
        return box[0]

    def finish(self, timeout: float = 30) -> tuple[str, str]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return out, err
