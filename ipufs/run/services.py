# The ipufs mounts on this machine as any user sees them: whether each is
# alive and how it serves BARs (its xattrs, read with a timeout so a hung
# daemon cannot hang the asker), and which of them are services this user
# may use: live passthrough mounts whose nodes it may open. `ipufs run`
# uses the first for a user by default (docs/compat.md); `ipufs doctor`
# reports them all.
from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass

from ipufs.fuse import mount as fmount


@dataclass(frozen=True)
class MountStatus:
    mountpoint: str
    source: str
    alive: bool
    mode: str
    detail: str
    fast_path: str = "unknown"  # "on", "off", "held: why" (user.ipufs.fast_path)
    transport: str = "unknown"  # "FUSE over io_uring (why)", "/dev/fuse (why)" (user.ipufs.transport)


def _getxattr(path: str, name: str, timeout: float = 2.0) -> str | None:
    """Read an ipufs xattr, giving up on a daemon that does not answer."""
    box: list[str | None] = [None]

    def get() -> None:
        try:
            box[0] = os.getxattr(path, name).decode()
        except OSError as exc:
            box[0] = f"!{errno.errorcode.get(exc.errno or 0, exc.errno)}"

    t = threading.Thread(target=get, daemon=True)
    t.start()
    t.join(timeout)
    return "!timeout" if t.is_alive() else box[0]


def mount_status() -> list[MountStatus]:
    found = []
    for entry in fmount.mounts():
        mode = _getxattr(entry.mountpoint, "user.ipufs.mode") or "!unknown"
        if mode.startswith("!"):
            alive = False
            detail = {"!ENOTCONN": "daemon gone: dead mount, `ipufs umount` clears it",
                      "!timeout": "daemon does not answer",
                      # The kernel refused the path before asking the daemon.
                      "!EACCES": "not readable by this user (a directory on its path is closed): "
                                 "whether it is alive is unknown"}.get(mode, f"error {mode[1:]}")
            mode = fast_path = transport = "unknown"
        else:
            alive = True
            reason = _getxattr(entry.mountpoint, "user.ipufs.mode_reason") or ""
            pid = _getxattr(entry.mountpoint, "user.ipufs.pid")
            detail = f"daemon pid {pid}" + (f"; {reason}" if reason else "")
            fast_path, transport = (
                value if value and not value.startswith("!") else "unknown"
                for value in (_getxattr(entry.mountpoint, f"user.ipufs.{name}") for name in ("fast_path", "transport")))
        found.append(MountStatus(entry.mountpoint, entry.source, alive, mode, detail, fast_path, transport))
    return found


def services(mounts: list[MountStatus]) -> tuple[list[str], list[str]]:
    """Live passthrough mounts whose ipu0 this user may open (the one /dev's
    links lead into first, then /run/ipufs), and those it may not."""
    usable: list[str] = []
    closed: list[str] = []
    for m in mounts:
        if m.alive and m.mode == "passthrough":
            node = os.path.join(m.mountpoint, "ipu0")
            (usable if os.access(node, os.R_OK | os.W_OK) else closed).append(m.mountpoint)
    linked = os.path.dirname(os.path.realpath("/dev/ipu0"))
    usable.sort(key=lambda m: (m != linked, m != "/run/ipufs"))
    return usable, closed


def usable_service() -> str | None:
    """The mount point of a live passthrough mount (an ipufs service) whose
    nodes this user may open, or None: what `ipufs run` uses by default
    for a user (docs/compat.md)."""
    usable, _ = services(mount_status())
    return usable[0] if usable else None
