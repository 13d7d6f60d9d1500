# The private view `ipufs run` gives a command: in a mount namespace of its
# own (and a user namespace, for an unprivileged user), a /dev holding the
# host's devices plus the emulated IPUs' nodes, and /sys/bus/pci/devices
# showing only those IPUs (docs/compat.md).
#
# The host's /dev is devtmpfs, one instance shared by every mount namespace:
# a file created in it would appear on the host. So the new /dev is a tmpfs,
# built aside and moved over /dev: each host device is bind-mounted onto an
# empty file (a device node made in a tmpfs of a user namespace could not be
# opened, a bind of the host's can), each directory (pts, shm, mqueue...) is
# bound whole, each link copied; the nodes are bound from the mount.
from __future__ import annotations

import os
import re
from pathlib import Path

from ipufs import native
from ipufs.compat import CONTAINER_SYSFS

_IPU_NAME = re.compile(r"ipu[0-9]+(_ex|_mailbox|_mem)?")
NODE_SUFFIXES = ("", "_ex", "_mailbox", "_mem")


def enter(user: bool) -> None:
    """Move this process into a new mount namespace (and a new user
    namespace mapping our own ids to themselves, when ``user``) whose
    mounts do not propagate back to the host. This process must have one
    thread: the kernel refuses a new user namespace otherwise."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"cannot enter a new namespace from a process with {threads} threads")
    uid, gid = os.geteuid(), os.getegid()
    native.unshare(native.CLONE_NEWNS | (native.CLONE_NEWUSER if user else 0))
    if user:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    native.mount("none", "/", "", native.MS_REC | native.MS_SLAVE, "")


def _bind(source: str, target: str, recursive: bool = False) -> None:
    native.mount(source, target, "", native.MS_BIND | (native.MS_REC if recursive else 0), "")


def build_dev(staging: Path, nodes: dict[str, str]) -> None:
    """Make ``staging`` (an empty directory) a tmpfs holding what the host's
    /dev holds, except its IPU names, plus ``nodes`` (name -> the file to
    bind there), then move it over /dev."""
    native.mount("tmpfs", str(staging), "tmpfs", native.MS_NOSUID, "mode=0755")
    for entry in os.scandir("/dev"):
        if _IPU_NAME.fullmatch(entry.name):
            continue  # the host's IPUs (links of a running daemon): ours replace them
        target = staging / entry.name
        try:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir():
                target.mkdir()
                _bind(entry.path, str(target), recursive=True)
            else:
                target.touch()
                _bind(entry.path, str(target))
        except OSError:
            continue  # a device that vanished meanwhile, or one we may not bind: leave it out
    for name, source in nodes.items():
        (staging / name).touch()
        _bind(source, str(staging / name))
    native.mount(str(staging), "/dev", "", native.MS_MOVE, "")


def bind_sysfs(view: Path) -> None:
    """Show ``view`` (a mount's sysfs view) at /sys/bus/pci/devices."""
    _bind(str(view), CONTAINER_SYSFS)


def node_files(root: Path, indices: list[int]) -> dict[str, str]:
    """The nodes of IPUs ``indices`` found in ``root`` (a mount or a
    directory of links to one), name -> real path."""
    return {f"ipu{i}{s}": os.path.realpath(root / f"ipu{i}{s}") for i in indices for s in NODE_SUFFIXES}
