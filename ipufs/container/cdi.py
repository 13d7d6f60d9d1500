# The CDI spec of one ipufs mount (Container Device Interface, spec 0.5.0,
# which podman 4.x, docker 25+, containerd 1.7+ and CRI-O read): kind
# graphcore.ai/ipu, a device per IPU and "all", each made of the binds that
# binds.py says an IPU brings; what every container needs once (the tmpfs at
# /sys/bus/pci/devices, the compatibility library and LD_PRELOAD) is the
# spec's own containerEdits, which CDI applies once whenever any of its
# devices is asked for. A tmpfs is a mount with a "type" (CDI 0.4.0 and
# later). The daemon writes the spec when its mount serves and removes it
# at unmount (docs/docker.md, "CDI").
#
# Two mounts on one host must not declare the same device names (a CDI
# registry refuses a name two specs declare): the mount at /run/ipufs names
# its devices 0..N-1 and all; any other mount puts a prefix before them,
# its mount point's last component unless told otherwise (cdi_prefix):
# /run/ipufs-b gives ipufs-b-0 ... ipufs-b-all. Each prefix has its own file,
# so a second live mount with the same prefix is refused, not overwritten.
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ipufs.container import follow as following
from ipufs.container.binds import ContainerEdits, ipu_edits, shared_edits
from ipufs.container.cdi_edits import container_edits, device_name
from ipufs.fuse import mount as fmount

log = logging.getLogger(__name__)

CDI_VERSION = "0.5.0"
VENDOR = "graphcore.ai"
CLASS = "ipu"
KIND = f"{VENDOR}/{CLASS}"
DEFAULT_DIR = "/var/run/cdi"
#: The mount point whose devices have plain names (0, 1, ..., all).
PLAIN_MOUNTPOINT = "/run/ipufs"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


class CdiConflict(RuntimeError):
    """Raised when another live mount's spec already declares our names."""


def default_prefix(mountpoint: str) -> str:
    """'' for /run/ipufs; else the mount point's last component, with
    characters a CDI name cannot hold made '_'."""
    mountpoint = os.path.normpath(mountpoint)
    if mountpoint == PLAIN_MOUNTPOINT:
        return ""
    base = re.sub(r"[^A-Za-z0-9_.:-]", "_", os.path.basename(mountpoint)) or "root"
    return base if base[0].isalnum() else "ipufs" + base


def check_prefix(prefix: str) -> str:
    if prefix and not _NAME.fullmatch(prefix):
        raise ValueError(f"CDI prefix {prefix!r}: use letters, digits, '_', '.', ':' and '-', "
                         "starting with a letter or digit")
    return prefix


def file_name(prefix: str) -> str:
    """graphcore.ai-ipu.json, or graphcore.ai-ipu_PREFIX.json (CDI's
    vendor-class naming)."""
    return f"{VENDOR}-{CLASS}{'_' + prefix if prefix else ''}.json"


def spec(mount_dir: str, ids: Iterable[int], prefix: str = "", follow: bool = False) -> dict[str, Any]:
    """The CDI spec, as JSON-ready data, for IPUs ``ids`` of ``mount_dir``;
    ``follow``: devices that follow daemon restarts (follow.py)."""
    ids = list(ids)
    if follow:
        devices, common = following.spec_edits(mount_dir, ids, prefix)
        return {"cdiVersion": CDI_VERSION, "kind": KIND, "devices": devices, "containerEdits": common}
    devices = [{"name": device_name(prefix, i), "containerEdits": container_edits(ipu_edits(mount_dir, i))}
               for i in ids]
    every = ContainerEdits()
    for i in ids:
        every = every + ipu_edits(mount_dir, i)
    devices.append({"name": device_name(prefix, "all"), "containerEdits": container_edits(every)})
    result: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": KIND, "devices": devices}
    common = container_edits(shared_edits(mount_dir))
    if common:
        result["containerEdits"] = common
    return result


def owner(path: Path) -> str | None:
    """The mount directory an ipufs spec file binds from (None: not one)."""
    try:
        data = json.loads(path.read_text())
        if data.get("kind") != KIND:
            return None
        edits_ = data["devices"][0]["containerEdits"]
        if "mounts" not in edits_:  # a following spec: its holder is in the shared edits
            return following.owner_of_holder(str(data["containerEdits"]["mounts"][-1]["hostPath"]))
        host_path = edits_["mounts"][0]["hostPath"]
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return os.path.dirname(str(host_path))


def _identity(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def _live(mount_dir: str) -> bool:
    return any(m.mountpoint == mount_dir for m in fmount.mounts()) and not fmount.is_dead(mount_dir)


class SpecFile:
    """The CDI spec file of one mount in ``directory``."""

    def __init__(self, directory: str | os.PathLike[str], mount_dir: str, ids: Iterable[int], prefix: str,
                 follow: bool = False) -> None:
        self.directory = Path(directory)
        self.mount_dir = mount_dir
        self.ids = list(ids)
        self.prefix = check_prefix(prefix)
        self.path = self.directory / file_name(prefix)
        self.follow = follow
        self.written = False
        self._identity: tuple[int, int] | None = None

    def clear_stale(self) -> list[Path]:
        """Remove ipufs specs left by mounts that are gone (a crashed
        daemon's, or this mount's under another prefix); returns them."""
        removed = []
        for path in sorted(self.directory.glob(f"{VENDOR}-{CLASS}*.json")):
            mount_dir = owner(path)
            if mount_dir is None or path == self.path:
                continue
            if mount_dir == self.mount_dir or not _live(mount_dir):
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def write(self) -> None:
        """Write the spec (atomically: engines may read the directory at any
        time), replacing a stale one; refuse one of a live other mount."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in self.clear_stale():
            log.info("removed the stale CDI spec %s", path)
        other = owner(self.path) if self.path.exists() else None
        if other is not None and other != self.mount_dir and _live(other):
            raise CdiConflict(f"CDI names {KIND}={device_name(self.prefix, 'N')} are taken by the mount at "
                              f"{other} ({self.path}): give this mount another --cdi-prefix, or --no-cdi")
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps(spec(self.mount_dir, self.ids, self.prefix, self.follow), indent=2) + "\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, self.path)
        self.written = True
        self._identity = _identity(self.path)

    def remove(self) -> None:
        """Remove the spec if it is still the file this daemon wrote: a
        successor at the same mount point writes a spec of its own (the
        same text, another inode), which an old daemon exiting later must
        leave alone."""
        if self.written:
            try:
                if _identity(self.path) == self._identity:
                    self.path.unlink()
            except FileNotFoundError:
                pass
        self.written = False
