# Mounting and unmounting a FUSE filesystem with mount(2) (no fusermount:
# ipufs runs as root), and finding ipufs mounts in /proc/self/mountinfo.
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from ipufs import native

FSTYPE = "fuse.ipufs"


@dataclass(frozen=True, slots=True)
class MountEntry:
    mountpoint: str
    fstype: str
    source: str
    options: str


def mount(
    fd: int,
    mountpoint: str,
    *,
    source: str = "ipufs",
    allow_other: bool = True,
    default_permissions: bool = True,
) -> None:
    """Mount the FUSE connection open on ``fd`` at ``mountpoint``."""
    st = os.stat(mountpoint)
    options = [
        f"fd={fd}",
        f"rootmode={stat.S_IFMT(st.st_mode) | 0o755:o}",
        f"user_id={os.getuid()}",
        f"group_id={os.getgid()}",
    ]
    if allow_other:
        options.append("allow_other")
    if default_permissions:
        options.append("default_permissions")
    native.mount(source, mountpoint, FSTYPE, native.MS_NOSUID | native.MS_NODEV, ",".join(options))


def unmount(mountpoint: str) -> bool:
    """Unmount; lazily when clients still hold files there, so that the
    name is free at once and the connection ends with its last user.
    Returns whether the unmount was lazy."""
    try:
        native.umount(mountpoint)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            native.umount(mountpoint, native.MNT_DETACH)
            return True
        if exc.errno not in (errno.EINVAL, errno.ENOENT):
            raise
    return False


CONTROL = "/sys/fs/fuse/connections"


def device_at(mountpoint: str) -> str | None:
    """The device number ("major:minor") of the superblock mounted at
    ``mountpoint``, the newest where several are stacked, or None when
    nothing is mounted there; read from /proc/self/mountinfo, because
    stat-ing the mount would be a request to its own server. A FUSE
    connection's number is its fusectl name's minor, and no other mount
    has it while that connection lives."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if _unescape(fields[4]) == mountpoint:
                found = fields[2]
    return found


def connection(mountpoint: str) -> str:
    """The fusectl name of the FUSE connection mounted at ``mountpoint``
    (the minor device number of its superblock)."""
    device = device_at(mountpoint)
    if device is None:
        raise OSError(errno.EINVAL, f"{mountpoint} is not a mount point")
    return device.split(":")[1]


def abort_connection(minor: str) -> None:
    """Abort FUSE connection ``minor`` through the fusectl filesystem: every
    waiting caller gets ENOTCONN, and the server's reads end with ENODEV.
    Nothing happens when the connection is gone already."""
    if not os.path.exists(f"{CONTROL}/{minor}"):
        try:
            native.mount("fusectl", CONTROL, "fusectl", 0, "")
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
    try:
        with open(f"{CONTROL}/{minor}/abort", "w") as f:
            f.write("1")
    except FileNotFoundError:
        pass


def stop(mountpoint: str) -> bool:
    """Unmount ``mountpoint`` so that its daemon exits: lazily when clients
    still hold files there, and then the connection is ended too (those
    files fail with ENOTCONN from then on), for a lazily unmounted
    connection would otherwise live, and its daemon serve, as long as they
    are held. Returns whether files were held."""
    if not any(m.mountpoint == mountpoint for m in mounts()):
        raise OSError(errno.EINVAL, f"{mountpoint} is not an ipufs mount")
    minor = connection(mountpoint)
    lazy = unmount(mountpoint)
    if lazy:
        abort_connection(minor)
    return lazy


def abort(mountpoint: str) -> None:
    """Abort the FUSE connection behind ``mountpoint`` and detach the mount.
    The remedy for a daemon that hangs instead of dying."""
    abort_connection(connection(mountpoint))
    native.umount(mountpoint, native.MNT_DETACH)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1 : i + 4]) == 3 and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points() -> set[str]:
    """Every mount point visible to this process, of any filesystem."""
    with open("/proc/self/mountinfo") as f:
        return {_unescape(line.split()[4]) for line in f}


def mounts(fstype: str = FSTYPE) -> list[MountEntry]:
    """The mounts of ``fstype`` visible to this process."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(rfields) >= 3 and rfields[0] == fstype:
                found.append(
                    MountEntry(_unescape(fields[4]), rfields[0], _unescape(rfields[1]), rfields[2])
                )
    return found


def is_dead(mountpoint: str) -> bool:
    """True when ``mountpoint`` is a FUSE mount whose daemon is gone.
    statfs always asks the daemon (stat may be answered from the attribute
    cache), and on a dead connection fails with ENOTCONN."""
    try:
        os.statvfs(mountpoint)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False
