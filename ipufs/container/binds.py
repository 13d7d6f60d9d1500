# What a container gets for a set of IPUs of one ipufs mount, said once:
# `ipufs docker` turns it into --mount flags, the CDI spec into containerEdits,
# a device plugin into its mounts and envs. Each IPU brings its four nodes,
# bound where tools hard-code them (/dev/ipuN, /dev/ipuN_ex, /dev/ipuN_mailbox,
# /dev/ipuN_mem, as the real driver names them); what every client needs
# beside them, whichever IPUs it gets, comes once (shared_edits).
#
# Nothing here touches the filesystem: the daemon computes its CDI spec from
# names alone, for a stat of its own mount would be a request to itself.
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ipufs.abi import nodes

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
class ContainerEdits:
    """Binds and environment variables, in the order a runtime applies them."""

    binds: tuple[Bind, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def __add__(self, other: ContainerEdits) -> ContainerEdits:
        return ContainerEdits(self.binds + other.binds, self.env + other.env)

    def __bool__(self) -> bool:
        return bool(self.binds or self.env)


def node_names(index: int) -> list[str]:
    """ipuN, ipuN_ex, ipuN_mailbox, ipuN_mem."""
    return [f"ipu{index}{suffix}" for suffix in NODE_SUFFIXES]


def ipu_edits(mount_dir: str, index: int) -> ContainerEdits:
    """The four nodes of IPU ``index`` of the mount at ``mount_dir``."""
    return ContainerEdits(tuple(Bind(os.path.join(mount_dir, name), f"{CONTAINER_DEV}/{name}")
                                for name in node_names(index)))


def shared_edits(mount_dir: str) -> ContainerEdits:
    """What a container needs once, whichever IPUs of ``mount_dir`` it gets.

    The single place for what is not an IPU's own node: the sysfs view
    (``compat.sysfs_view(mount_dir)`` bound at ``compat.CONTAINER_SYSFS``) and
    the compatibility library (``compat.library_path()`` bound at
    ``compat.CONTAINER_LIBRARY``, with ``LD_PRELOAD`` naming it) belong here.
    Today a container needs nothing beyond the nodes."""
    return ContainerEdits()


def edits(mount_dir: str, ids: Iterable[int]) -> ContainerEdits:
    """Everything a container gets for IPUs ``ids`` of the mount at ``mount_dir``."""
    result = shared_edits(mount_dir)
    for index in ids:
        result = result + ipu_edits(mount_dir, index)
    return result
