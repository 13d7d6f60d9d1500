# How the monitoring tools reach a daemon without waiting on a stopped
# one. Every request to a FUSE mount (a readdir, the xattr naming the
# control socket, a read of a node) waits in the kernel for as long as its
# daemon is stopped (SIGSTOP, a debugger), with no timeout. So the daemon
# is asked first over its control socket, found without a request to the
# mount: $IPUFS_CONTROL (inside `ipufs run`), else the default socket
# beside the mount point (MOUNTPOINT.ctl), the mount point being the
# nodes' directory itself or where /dev's links point (read from
# /proc/self/mountinfo and readlink, which never ask the daemon). Only a
# daemon that answered within the timeout has its mount read. A daemon
# whose control socket was put elsewhere (--control) is asked through the
# mount, as before.
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import cast

from ipufs.abi.ipu_view import IpuView
from ipufs.client import Control
from ipufs.client.where import default_control
from ipufs.tools import devices


def _unescape(field: str) -> str:
    """A mountinfo path: spaces and the like are written as octal escapes."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def fuse_mounts() -> set[str]:
    """The mount points of FUSE filesystems this process sees."""
    points = set()
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                head, _, tail = line.partition(" - ")
                if tail.startswith("fuse"):
                    points.add(_unescape(head.split()[4]))
    except OSError:
        pass
    return points


def mountpoint(root: Path) -> str | None:
    """The FUSE mount serving the IPUs under ``root``, found without a
    request to it; None when it cannot be told that way."""
    points = fuse_mounts()
    here = os.path.abspath(root)
    if here in points:
        return here
    try:
        link = os.readlink(os.path.join(here, "ipu0"))  # /dev/ipu0 -> /run/ipufs/ipu0
    except OSError:
        return None
    where = os.path.dirname(os.path.normpath(os.path.join(here, link)))
    return where if where in points else None


def control_socket(root: Path) -> str | None:
    """The control socket of the daemon serving ``root``, found without a
    request to its mount; None when it cannot be."""
    named = default_control()
    if named:
        return named
    point = mountpoint(root)
    if point is None:
        return None
    beside = point.rstrip("/") + ".ctl"
    try:
        return beside if stat.S_ISSOCK(os.stat(beside).st_mode) else None
    except OSError:
        return None


def views(root: Path, timeout: float | None = None) -> dict[int, IpuView]:
    """Every IPU's view from the daemon serving ``root``, asked before its
    mount is. Raises ControlTimeout when it does not answer within
    ``timeout`` (Control.TIMEOUT unless told), OSError when it is gone
    (ECONNREFUSED, ENOTCONN), ControlError when it refuses."""
    path = control_socket(root)
    if path is None:
        return devices.daemon_views(root, timeout)
    with Control(path, timeout) as control:
        answer = control.request("status")
    return {v["ipu"]: devices.seen_here(v) for v in cast(list[IpuView], answer["ipus"])}
