# What a container gets for some IPUs of a mount, as Allocate answers it.
# ipufs says that once, in ipufs/container/binds.py (each IPU's four nodes
# bound at /dev/ipuN*, and what every client needs beside them); the CDI
# spec the daemon writes is made of the same edits (ipufs/container/cdi.py).
# Allocate turns them into kubelet's mounts and environment, or names the
# CDI devices, and adds a variable naming the IPUs. Never a device node
# (DeviceSpec): a FUSE file is none, and the runtime would refuse it.
from __future__ import annotations

from collections.abc import Sequence

from ipufs.container import binds, cdi

#: The environment variable naming the allocated IPUs, comma-separated.
VISIBLE_IPUS = "IPUFS_VISIBLE_IPUS"


def container_edits(mount_dir: str, ipus: Sequence[int]) -> binds.ContainerEdits:
    """The binds and environment that give a container ``ipus`` of the
    mount at ``mount_dir``."""
    named = binds.ContainerEdits(env=((VISIBLE_IPUS, ",".join(str(i) for i in ipus)),))
    return binds.edits(mount_dir, ipus) + named


def cdi_names(prefix: str, ipus: Sequence[int]) -> list[str]:
    """Fully qualified CDI device names of ``ipus`` in the spec the daemon
    writes for its mount (kind graphcore.ai/ipu, names under ``prefix``)."""
    return [f"{cdi.KIND}={cdi.device_name(prefix, ipu)}" for ipu in ipus]


def default_cdi_prefix(mount_dir: str) -> str:
    """The prefix the daemon gives its CDI names unless told another."""
    return cdi.default_prefix(mount_dir)
