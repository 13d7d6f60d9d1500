# The read-only extended attributes of an ipufs mount (docs/filesystem.md,
# "Extended attributes"): on the root, facts about the daemon (version,
# the mode BARs are served in and why, profile, IPUs, pid, control socket,
# whether the native fast path answers, how requests reach the daemon);
# on each device node, its IPU, region and the device number the
# compatibility library reports. GETXATTR and LISTXATTR with size 0 ask
# only for the size (fuse_getxattr_out); a smaller buffer gets ERANGE.
from __future__ import annotations

import errno
import os

from ipufs import __version__
from ipufs.driver.devices import DeviceSet
from ipufs.driver.mapping import BarMapping
from ipufs.driver.nodes import Node
from ipufs.fuse import replies as rp
from ipufs.fuse.errors import FUSEError


def of_root(devices: DeviceSet, mapping: BarMapping, control_path: str, fast_path: str,
            transport: str) -> dict[bytes, bytes]:
    return {
        b"user.ipufs.version": __version__.encode(),
        b"user.ipufs.mode": mapping.settle().encode(),
        b"user.ipufs.mode_reason": mapping.reason.encode(),
        b"user.ipufs.profile": devices.profile.name.encode(),
        b"user.ipufs.ipus": str(len(devices)).encode(),
        b"user.ipufs.pid": str(os.getpid()).encode(),
        b"user.ipufs.persistent": b"1" if devices.persistent else b"0",
        b"user.ipufs.control": control_path.encode(),
        b"user.ipufs.fast_path": fast_path.encode(),
        b"user.ipufs.transport": transport.encode(),
    }


def of_node(node: Node) -> dict[bytes, bytes]:
    return {
        b"user.ipufs.ipu": str(node.ipu).encode(),
        b"user.ipufs.region": node.region.value.encode(),
        # What the compatibility library reports as st_rdev (docs/compat.md).
        b"user.ipufs.rdev": f"{os.major(node.rdev)}:{os.minor(node.rdev)}".encode(),
    }


def sized(value: bytes, size: int) -> rp.Data | rp.XattrSize:
    """The answer to a GETXATTR or LISTXATTR of ``size`` for ``value``."""
    if size == 0:
        return rp.XattrSize(len(value))
    if size < len(value):
        raise FUSEError(errno.ERANGE)
    return rp.Data(value)
