# What a container gets for a set of IPUs of one ipufs mount, said once:
# `ipufs docker` turns it into --mount flags, the CDI spec into containerEdits,
# a device plugin into its mounts and envs. Each IPU brings its four nodes,
# bound where tools hard-code them (/dev/ipuN, /dev/ipuN_ex, /dev/ipuN_mailbox,
# /dev/ipuN_mem, as the real driver names them), and its directory of the
# mount's sysfs view at /sys/bus/pci/devices/ADDRESS; what every client needs
# beside them, whichever IPUs it gets, comes once (shared_edits): an empty
# /sys/bus/pci/devices for those directories, so that it lists exactly the
# container's IPUs (aspen-sdk's listing fails on an entry without file_name),
# and the compatibility library, preloaded (docs/compat.md, docs/docker.md).
#
# Runtimes order mounts by the depth of their targets (docker, podman, the
# CDI library, containerd and CRI-O all sort them), so the directory at
# /sys/bus/pci/devices is mounted before the IPUs' directories below it,
# whatever order a consumer lists them in.
#
# Nothing here touches the filesystem: the daemon computes its CDI spec from
# names alone, for a stat of its own mount would be a request to itself.
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ipufs import compat
from ipufs.abi import nodes
from ipufs.abi.pci import pci_address

#: The nodes of one IPU, as suffixes of ipuN.
NODE_SUFFIXES = tuple(nodes.SUFFIXES.values())
#: Where tools look for the nodes inside a container.
CONTAINER_DEV = "/dev"


@dataclass(frozen=True, slots=True)
class Bind:
    """A bind mount of the host's ``source`` at ``target`` in the container."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Tmpfs:
    """An empty tmpfs at ``target`` in the container (mode 0755), to hold
    binds below it. No engine may fill it with what the image has there
    (podman's `tmpcopyup`, its default for --mount type=tmpfs)."""

    target: str
    mode: int = 0o755


@dataclass(frozen=True, slots=True)
class ContainerEdits:
    """Mounts and environment variables a container gets."""

    binds: tuple[Bind, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    tmpfs: tuple[Tmpfs, ...] = ()

    def __add__(self, other: ContainerEdits) -> ContainerEdits:
        return ContainerEdits(self.binds + other.binds, self.env + other.env, self.tmpfs + other.tmpfs)

    def __bool__(self) -> bool:
        return bool(self.binds or self.env or self.tmpfs)


def node_names(index: int) -> list[str]:
    """ipuN, ipuN_ex, ipuN_mailbox, ipuN_mem."""
    return [f"ipu{index}{suffix}" for suffix in NODE_SUFFIXES]


def sysfs_target(index: int) -> str:
    """Where IPU ``index``'s directory of the sysfs view goes in a container."""
    return f"{compat.CONTAINER_SYSFS}/{pci_address(index)}"


def ipu_edits(mount_dir: str, index: int) -> ContainerEdits:
    """The four nodes of IPU ``index`` of the mount at ``mount_dir``, then
    its directory of the sysfs view (read-only, as sysfs is)."""
    nodes = tuple(Bind(os.path.join(mount_dir, name), f"{CONTAINER_DEV}/{name}") for name in node_names(index))
    view = Bind(str(compat.sysfs_device(mount_dir, pci_address(index))), sysfs_target(index), read_only=True)
    return ContainerEdits(nodes + (view,))


def library_edits(library: str | None = None) -> ContainerEdits:
    """The compatibility library (``library``, default the installed one)
    bound read-only at compat.CONTAINER_LIBRARY, and LD_PRELOAD naming it."""
    source = library or str(compat.library_path())
    return ContainerEdits((Bind(source, compat.CONTAINER_LIBRARY, read_only=True),),
                          (("LD_PRELOAD", compat.CONTAINER_LIBRARY),))


def shared_edits(mount_dir: str, devices_dir: str | None = None, library: str | None = None) -> ContainerEdits:
    """What a container needs once, whichever IPUs of ``mount_dir`` it gets:
    an empty /sys/bus/pci/devices (a tmpfs) for the IPUs' directories, and
    the compatibility library, preloaded.

    For a runtime that takes bind mounts only (kubelet's answer to a device
    plugin), ``devices_dir`` names a host directory holding one empty
    directory per IPU the container gets, named by its PCI address
    (deviceplugin/sysfs_dirs.py): it is bound there instead of the tmpfs,
    and the IPUs' directories of the view are bound onto its own."""
    parent = (ContainerEdits((Bind(devices_dir, compat.CONTAINER_SYSFS, read_only=True),)) if devices_dir
              else ContainerEdits(tmpfs=(Tmpfs(compat.CONTAINER_SYSFS),)))
    return parent + library_edits(library)


def edits(mount_dir: str, ids: Iterable[int], devices_dir: str | None = None,
          library: str | None = None) -> ContainerEdits:
    """Everything a container gets for IPUs ``ids`` of the mount at
    ``mount_dir`` (``devices_dir``, ``library``: see shared_edits)."""
    result = shared_edits(mount_dir, devices_dir, library)
    for index in ids:
        result = result + ipu_edits(mount_dir, index)
    return result
