# What a container gets for some IPUs of a mount, as Allocate answers it.
# ipufs says that once, in ipufs/container/binds.py (each IPU's four nodes
# bound at /dev/ipuN* and its sysfs directory, and what every client needs
# beside them); the CDI spec the daemon writes is made of the same edits
# (ipufs/container/cdi.py). Allocate turns them into kubelet's mounts and
# environment, or names the CDI devices, and adds a variable naming the
# IPUs. Kubelet's mounts are binds only: the empty /sys/bus/pci/devices is
# then a directory of the plugin's (sysfs_dirs.py), not a tmpfs. Never a
# device node (DeviceSpec): a FUSE file is none, and the runtime would
# refuse it.
from __future__ import annotations

from collections.abc import Sequence

from ipufs.container import binds, cdi
from ipufs.container.cdi_edits import device_name

#: The environment variable naming the allocated IPUs, comma-separated.
VISIBLE_IPUS = "IPUFS_VISIBLE_IPUS"


def visible(ipus: Sequence[int]) -> str:
    """The value of VISIBLE_IPUS: the IPUs as asked for, "3,2"."""
    return ",".join(str(i) for i in ipus)


def container_edits(mount_dir: str, ipus: Sequence[int], devices_dir: str, library: str) -> binds.ContainerEdits:
    """The binds and environment that give a container ``ipus`` of the
    mount at ``mount_dir``: ``devices_dir`` bound at /sys/bus/pci/devices,
    the compatibility library from ``library``."""
    named = binds.ContainerEdits(env=((VISIBLE_IPUS, visible(ipus)),))
    return binds.edits(mount_dir, ipus, devices_dir, library) + named


def cdi_names(prefix: str, ipus: Sequence[int]) -> list[str]:
    """Fully qualified CDI device names of ``ipus`` in the spec the daemon
    writes for its mount (kind graphcore.ai/ipu, names under ``prefix``)."""
    return [f"{cdi.KIND}={device_name(prefix, ipu)}" for ipu in ipus]


def default_cdi_prefix(mount_dir: str) -> str:
    """The prefix the daemon gives its CDI names unless told another."""
    return cdi.default_prefix(mount_dir)
