# What a container gets for some IPUs of a mount, as Allocate answers it:
# bind mounts of each IPU's four nodes at /dev/ipuN* (as `ipufs docker`
# binds them, docs/docker.md), and the environment naming the IPUs. Never a
# device node (DeviceSpec): a FUSE file is none, and the runtime would
# refuse it. With CDI, the runtime reads the same edits from a CDI spec
# on the node, and Allocate only names the devices.
#
# This is the one place the device plugin asks what a container gets;
# where ipufs keeps one shared description of it (the binds, the sysfs view,
# the compatibility library preloaded), `container_edits` should return
# that description instead.
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ipufs.tools.docker import SUFFIXES

#: The environment variable naming the allocated IPUs, comma-separated.
VISIBLE_IPUS = "IPUFS_VISIBLE_IPUS"


@dataclass(frozen=True)
class Bind:
    host_path: str
    container_path: str
    read_only: bool = False


@dataclass(frozen=True)
class ContainerEdits:
    binds: tuple[Bind, ...]
    env: dict[str, str]


def container_edits(root: Path, ipus: Sequence[int]) -> ContainerEdits:
    """The binds and environment that give a container ``ipus`` of the
    nodes under ``root`` (host paths resolved through /dev links)."""
    binds = []
    for ipu in ipus:
        for suffix in SUFFIXES:
            name = f"ipu{ipu}{suffix}"
            binds.append(Bind(os.path.realpath(root / name), f"/dev/{name}"))
    return ContainerEdits(tuple(binds), {VISIBLE_IPUS: ",".join(str(i) for i in ipus)})


def cdi_names(kind: str, ipus: Sequence[int]) -> list[str]:
    """Fully qualified CDI device names: ``vendor/class=N``."""
    return [f"{kind}={ipu}" for ipu in ipus]
