# CDI devices that follow daemon restarts (`ipufs mount --cdi-follow-restarts`,
# docs/docker.md, "Daemon restarts"). A bind of a node file holds the mount it
# came from, so a restarted daemon's new mount never reaches it. Mount
# propagation does reach mounts made *below* a directory a container bound
# with `rslave`, when the host's side of it is in a shared peer group. So:
#
# - the daemon keeps a holder directory MOUNTPOINT.follow, made its own
#   shared mount (a bind of itself) once and left in place, so that every
#   container bound from it stays a slave of the same peer group across
#   restarts; at start it binds its FUSE mount at HOLDER/mount and unmounts
#   it (lazily: containers may hold files there) when it stops, and each
#   mount or unmount there propagates into the containers;
# - the spec binds the holder into the container (rbind, rslave) and a CDI
#   createContainer hook (OCI runtime spec: run in the container's mount
#   namespace after its mounts, before pivot_root) makes /dev/ipuN* and
#   /sys/bus/pci/devices/ADDRESS symbolic links into it (hook.py).
#
# The cost: the holder holds the whole mount, so a container sees every IPU
# of it under CONTAINER_ROOT, though its links and sysfs listing name only
# its own (ATTACH still refuses an IPU another process holds, EBUSY).
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ipufs import compat, native, self_command
from ipufs.abi.pci import pci_address
from ipufs.container.binds import CONTAINER_DEV, node_names, shared_edits, sysfs_target
from ipufs.container.cdi_edits import container_edits, device_name
from ipufs.fuse import mount as fmount

MS_SHARED = 1 << 20
#: Where the holder appears in a container (read-write, for the nodes),
#: and again read-only (for the sysfs view, read-only as sysfs is).
CONTAINER_ROOT = "/run/ipufs-follow"
#: What makes a mount point's holder directory of it.
HOLDER_SUFFIX = ".follow"
CONTAINER_VIEW_ROOT = "/run/ipufs-follow-view"
#: The holder's directory the daemon binds its mount at.
INNER = "mount"


def holder_dir(mount_dir: str) -> str:
    """MOUNTPOINT.follow, beside the mount point (as MOUNTPOINT.ctl is)."""
    return os.path.normpath(mount_dir) + HOLDER_SUFFIX


def container_root(prefix: str, view: bool = False) -> str:
    """Where a spec of ``prefix`` binds its holder in a container: each
    spec its own, so that devices of two mounts can go in one container."""
    root = CONTAINER_VIEW_ROOT if view else CONTAINER_ROOT
    return f"{root}-{prefix}" if prefix else root


class Holder:
    """The holder directory of one mount, and this daemon's bind in it."""

    def __init__(self, mount_dir: str) -> None:
        self.mount_dir = mount_dir
        self.path = holder_dir(mount_dir)
        self.inner = os.path.join(self.path, INNER)
        self.bound = False

    def install(self) -> None:
        """Make the holder a shared mount (once), clear a crashed daemon's
        bind in it, and bind the mount there. Blocking, and it looks the
        mount up: call it off the thread that serves the mount."""
        os.makedirs(self.inner, exist_ok=True)
        if self.path not in fmount.mount_points():
            native.mount(self.path, self.path, "", native.MS_BIND, "")
        native.mount("", self.path, "", MS_SHARED, "")
        self.clear()
        native.mount(self.mount_dir, self.inner, "", native.MS_BIND, "")
        self.bound = True

    def clear(self) -> None:
        """Unmount every bind at HOLDER/mount (a predecessor's, dead or
        not: a mount point is this daemon's once it mounts)."""
        while self.inner in fmount.mount_points():
            native.umount(self.inner, native.MNT_DETACH)

    def remove(self) -> None:
        """Unmount this daemon's bind (lazily); the holder stays, so that
        containers bound from it see the next daemon's mount."""
        if self.bound:
            try:
                native.umount(self.inner, native.MNT_DETACH)
            except OSError:
                pass
            self.bound = False


def hook_links(index: int, prefix: str) -> list[str]:
    """LINK=TARGET arguments of the hook for IPU ``index``."""
    root, view = container_root(prefix), container_root(prefix, view=True)
    links = [f"{CONTAINER_DEV}/{name}={root}/{INNER}/{name}" for name in node_names(index)]
    address = pci_address(index)
    links.append(f"{sysfs_target(index)}={compat.sysfs_device(f'{view}/{INNER}', address)}")
    return links


def hook(links: list[str]) -> dict[str, Any]:
    """The CDI createContainer hook that makes ``links``: `ipufs cdi-hook`,
    run by this installation (host paths: the hook runs before pivot_root).
    The runtime runs it as root in the container's root filesystem, so it
    is isolated from what the image holds (self_command.py) and given an
    empty environment."""
    argv = self_command.argv("cdi-hook", *links)
    return {"hookName": "createContainer", "path": argv[0], "args": argv, "env": []}


def spec_edits(mount_dir: str, ids: Iterable[int], prefix: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The devices and the shared containerEdits of a following spec."""
    ids = list(ids)
    devices = [{"name": device_name(prefix, i), "containerEdits": {"hooks": [hook(hook_links(i, prefix))]}}
               for i in ids]
    every = [link for i in ids for link in hook_links(i, prefix)]
    devices.append({"name": device_name(prefix, "all"), "containerEdits": {"hooks": [hook(every)]}})
    common: dict[str, Any] = container_edits(shared_edits(mount_dir))
    holder = holder_dir(mount_dir)
    common["mounts"] = common.get("mounts", []) + [
        {"hostPath": holder, "containerPath": container_root(prefix), "options": ["rbind", "rslave", "rw"]},
        {"hostPath": holder, "containerPath": container_root(prefix, view=True),
         "options": ["rbind", "rslave", "ro"]}]
    return devices, common


def owner_of_holder(host_path: str) -> str | None:
    """The mount directory of a holder path (MOUNTPOINT.follow)."""
    return host_path.removesuffix(HOLDER_SUFFIX) if host_path.endswith(HOLDER_SUFFIX) else None

