# `ipufs doctor`: can this machine serve IPUs with passthrough, and what is
# mounted now? Each check is a Finding; a probe mount answers the question
# no file in /proc or /sys can (does the kernel accept a backing file?).
from __future__ import annotations

import os
import platform
import stat
import sys
import tempfile
from dataclasses import asdict, dataclass

import trio

from ipufs.fuse import mount as fmount
from ipufs.fuse import transports, uring
from ipufs.run.services import MountStatus, mount_status, services

CAP_SYS_ADMIN = 21
PASSTHROUGH_KERNEL = (6, 9)


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str


def _kernel_version() -> tuple[int, int]:
    parts = platform.release().split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)


def _has_cap(cap: int) -> bool:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def check_device() -> Finding:
    try:
        st = os.stat("/dev/fuse")
    except OSError as exc:
        return Finding("/dev/fuse", False, f"missing: {exc.strerror} (modprobe fuse)")
    if not stat.S_ISCHR(st.st_mode):
        return Finding("/dev/fuse", False, "exists but is not a character device")
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return Finding("/dev/fuse", False, f"cannot be opened: {exc.strerror}")
    return Finding("/dev/fuse", True, "present and can be opened")


def check_kernel() -> Finding:
    version = _kernel_version()
    ok = version >= PASSTHROUGH_KERNEL
    want = ".".join(map(str, PASSTHROUGH_KERNEL))
    detail = f"Linux {platform.release()}" + ("" if ok else f": passthrough needs {want} or newer")
    return Finding("kernel", ok, detail)


def check_privileges() -> Finding:
    if _has_cap(CAP_SYS_ADMIN):
        return Finding("privileges", True, "CAP_SYS_ADMIN (mount and passthrough allowed)")
    return Finding("privileges", False, "no CAP_SYS_ADMIN: cannot mount or register backing files")


def probe_passthrough() -> Finding:
    """Mount a one-IPU ipufs in a temporary directory and register a
    backing file with the kernel, as a real mount would."""
    from ipufs.daemon.config import DaemonConfig
    from ipufs.daemon.daemon import Daemon

    def open_a_node(mountpoint: str) -> tuple[str, str]:
        """Open ipu0 as a client would (its open registers its backing
        file), then read the mode the mount reports."""
        os.close(os.open(os.path.join(mountpoint, "ipu0"), os.O_RDWR))
        return (os.getxattr(mountpoint, "user.ipufs.mode").decode(),
                os.getxattr(mountpoint, "user.ipufs.mode_reason").decode())

    async def probe(mountpoint: str) -> Finding:
        daemon = Daemon(DaemonConfig(mountpoint=mountpoint, ipus=1, profile="ipu1"))
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                serving = await nursery.start(daemon.run)
                try:
                    if not serving.negotiated.passthrough:
                        return Finding("passthrough", False, "the kernel did not offer FUSE_PASSTHROUGH")
                    mode, reason = await trio.to_thread.run_sync(open_a_node, mountpoint)
                    if mode != "passthrough":
                        return Finding("passthrough", False, reason)
                    return Finding("passthrough", True, "a backing file was registered")
                finally:
                    # Unmount when done here; not before: a cancelled scope
                    # would stop the opening thread before it starts.
                    nursery.cancel_scope.cancel()
        return Finding("passthrough", False, "probe gave no answer")

    try:
        with tempfile.TemporaryDirectory(prefix="ipufs-doctor-") as tmp:
            return trio.run(probe, tmp)
    except Exception as exc:  # the probe is advice, never a crash
        return Finding("passthrough", False, f"probe mount failed: {exc}")


def _sysctl(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _root_mode(findings: list[Finding], mounts: list[MountStatus]) -> Finding:
    """What `ipufs run` as root gets. Root's answer does not depend on who
    asks: only a kernel without passthrough, or a probe that failed, makes
    it page-cache. Unprobed (the probe needs CAP_SYS_ADMIN), it is what the
    kernel offers, and a live mount in passthrough mode confirms it."""
    by = {f.check: f for f in findings}
    kernel, probe = by.get("kernel"), by.get("passthrough")
    serving = [m.mountpoint for m in mounts if m.alive and m.mode == "passthrough"]
    if kernel is not None and not kernel.ok:
        detail = f"page-cache ({kernel.detail})"
    elif probe is not None:
        detail = "passthrough" if probe.ok else f"page-cache ({probe.detail})"
    elif serving:
        detail = f"passthrough (the mount at {serving[0]} serves in passthrough mode now)"
    else:
        detail = ("passthrough, as the kernel offers it to CAP_SYS_ADMIN (not probed: the probe needs "
                  "root; `ipufs doctor` run as root checks it)")
    return Finding("ipufs run as root", True, detail)


def _closed_to_others(path: str) -> str | None:
    """The first directory on the way to ``path`` (the path as given, and
    where its links lead) that users other than its owner and group cannot
    enter, or ``path`` itself when they cannot run it; None when all can."""
    for way in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
        parts = way.split("/")
        for i in range(2, len(parts) + 1):
            step = "/".join(parts[:i])
            try:
                mode = os.stat(step).st_mode
            except OSError:
                return step
            if not mode & stat.S_IXOTH:
                return step
    return None


def python_closed_to_users(executable: str | None = None) -> str | None:
    """Why other users cannot run this installation of ipufs (its Python
    lies where they cannot enter), with the cure; None when they can."""
    python = executable or sys.executable
    closed = _closed_to_others(python)
    if closed is None:
        return None
    return (f"this ipufs's Python ({python}) lies under {closed}, which other users cannot enter or run, so "
            "`ipufs` answers them `Permission denied` (status 126): make the venv from a Python they can run "
            "(`rm -rf .venv && PYTHON=/usr/bin/python3 ./dev setup`), or install ipufs with one")


def run_modes(findings: list[Finding], mounts: list[MountStatus]) -> list[Finding]:
    """What `ipufs run` gives root and an unprivileged user on this machine,
    and why: root mounts in a mount namespace (passthrough where possible);
    a user needs /dev/fuse open to users and user namespaces, and gets the
    page-cache mode (passthrough needs CAP_SYS_ADMIN of the host), or the
    IPUs of a service already mounted, with passthrough, through
    `ipufs run --dev`."""
    root = _root_mode(findings, mounts)
    reasons = []
    try:
        mode = os.stat("/dev/fuse").st_mode
        if mode & 0o006 != 0o006:
            reasons.append(f"/dev/fuse is {stat.S_IMODE(mode):04o}, so users cannot open it "
                           "(most distributions ship it 0666)")
    except OSError:
        reasons.append("/dev/fuse is missing")
    if _sysctl("/proc/sys/user/max_user_namespaces") == 0:
        reasons.append("user namespaces are off (user.max_user_namespaces = 0)")
    if _sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0:
        reasons.append("unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0)")
    if _sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1:
        reasons.append("AppArmor restricts unprivileged user namespaces")
    if _kernel_version() < (4, 18):
        reasons.append("FUSE in user namespaces needs Linux 4.18")
    unreachable = python_closed_to_users()
    if unreachable is not None:
        reasons.append(unreachable)
    usable, closed = services(mounts)
    if usable:
        service = (f"; `ipufs run` (with no mount options) uses the IPUs of the service at {usable[0]}, "
                   "in passthrough mode")
    elif closed:
        service = (f"; the service at {closed[0]} serves passthrough, but its nodes are not open to you "
                   "(their group and mode decide: docs/systemd.md)")
    else:
        service = ""
    user = Finding("ipufs run as a user", not reasons or bool(usable),
                   "; ".join(reasons) + service if reasons else
                   "page-cache mode in a user and mount namespace (passthrough needs CAP_SYS_ADMIN); "
                   "page-cache mode gives the same answers (docs/filesystem.md)" + service)
    return [root, user]


def check_uring() -> Finding:
    """What a new mount with --uring auto (the default) uses. Not a
    requirement: /dev/fuse serves the same answers."""
    choice = transports.choose({})
    use = choice.kind is uring.KIND
    return Finding("FUSE over io_uring", use, f"new mounts use it: {choice.reason}" if use else
                   f"new mounts serve through {choice.kind.name}: {choice.reason}")


def run(*, probe: bool = True) -> tuple[list[Finding], list[MountStatus]]:
    findings = [check_device(), check_kernel(), check_privileges()]
    if probe and all(f.ok for f in findings if f.check in ("/dev/fuse", "privileges")):
        findings.append(probe_passthrough())
    return findings, mount_status()


def as_dict(findings: list[Finding], mounts: list[MountStatus]) -> dict[str, object]:
    passthrough = all(f.ok for f in findings)
    return {
        "passthrough_possible": passthrough,
        "checks": [asdict(f) for f in findings],
        "run": [asdict(f) for f in run_modes(findings, mounts)],
        "uring": asdict(check_uring()),
        "mounts": [asdict(m) for m in mounts],
    }
