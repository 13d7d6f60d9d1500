# Links /dev/ipuN, /dev/ipuN_ex, /dev/ipuN_mailbox and /dev/ipuN_mem to the
# mounted nodes, so tools that hard-code /dev/ipu0 work unchanged. A name
# that holds anything but a link of ours (a real device, a file, a link to
# elsewhere, a link of another live ipufs daemon) is left untouched, and the
# warning says which of these it was. A link
# is ours when it points at the node of the same name in our mount point,
# or in an ipufs mount whose daemon is dead, or in a directory that no
# longer exists (what a crashed daemon leaves behind).
#
# The daemon never looks at its own mount point here: a stat of it would be
# a FUSE request to itself, which it cannot answer while it waits.
from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from ipufs.driver.nodes import NodeTree
from ipufs.fuse import mount as fmount

log = logging.getLogger(__name__)


def _mount_alive(path: str) -> bool:
    """Whether the ipufs mount at ``path`` has a live daemon (statfs on a
    dead FUSE connection fails at once with ENOTCONN)."""
    try:
        os.statvfs(path)
    except OSError as exc:
        return exc.errno != errno.ENOTCONN
    return True


class DevLinks:
    def __init__(self, dev_dir: str | os.PathLike[str], mountpoint: str, tree: NodeTree) -> None:
        self.dev_dir = Path(dev_dir)
        self.mountpoint = mountpoint
        self.tree = tree
        self.made: list[Path] = []
        self.refused: list[str] = []
        self._inodes: dict[Path, tuple[int, int]] = {}

    def _owner(self, link: Path) -> str | None:
        """'mine' (points into our mount point), 'stale' (into a dead ipufs
        mount or a missing directory), 'live' (into another ipufs mount
        whose daemon serves it), or None (anything else)."""
        if not link.is_symlink():
            return None
        target = os.readlink(link)
        parent, name = os.path.split(target)
        if name != link.name or not os.path.isabs(target):
            return None
        if parent == self.mountpoint:
            return "mine"
        if any(m.mountpoint == parent for m in fmount.mounts()):
            return "live" if _mount_alive(parent) else "stale"
        return "stale" if not os.path.lexists(parent) else None

    def clear_stale(self) -> int:
        """Remove links that point into dead mounts or missing directories
        (a crashed daemon's); returns how many."""
        removed = 0
        for link in self.dev_dir.glob("ipu*"):
            if self._owner(link) == "stale":
                link.unlink()
                removed += 1
        return removed

    def install(self) -> None:
        #: The names left to other live ipufs mounts, by mount point.
        taken: dict[str, list[str]] = {}
        strangers: list[str] = []
        for node in self.tree:
            link = self.dev_dir / node.name
            target = os.path.join(self.mountpoint, node.name)
            owner = self._owner(link) if os.path.lexists(link) else "free"
            if owner in (None, "live"):
                self.refused.append(node.name)
                if owner == "live":
                    taken.setdefault(os.path.dirname(os.readlink(link)), []).append(node.name)
                else:
                    strangers.append(node.name)
                continue
            # Always a link of our own, put in place atomically (over a
            # stale one, or an equal one a predecessor at this mount point
            # made): its inode tells remove() that it is still ours.
            temporary = link.with_name(f".{link.name}.ipufs-{os.getpid()}")
            try:
                temporary.unlink()
            except FileNotFoundError:
                pass
            os.symlink(target, temporary)
            os.replace(temporary, link)
            self.made.append(link)
            self._inodes[link] = _identity(link)
        for mount, names in taken.items():
            log.warning("left %s in %s to the ipufs mount at %s, whose links they are (this mount's "
                        "nodes are in %s): %s", _count(names), self.dev_dir, mount, self.mountpoint, _listed(names))
        if strangers:
            log.warning("left %s in %s untouched (not ipufs links): %s", _count(strangers), self.dev_dir,
                        _listed(strangers))

    def remove(self) -> None:
        """Remove the links this daemon made, and no other: a successor at
        the same mount point replaces them with links of its own."""
        for link in self.made:
            try:
                if _identity(link) == self._inodes.get(link):
                    link.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not remove %s: %s", link, exc)
        self.made.clear()
        self._inodes.clear()


def _count(names: list[str]) -> str:
    return f"{len(names)} name{'s' if len(names) != 1 else ''}"


def _listed(names: list[str]) -> str:
    return ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")


def _identity(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino
