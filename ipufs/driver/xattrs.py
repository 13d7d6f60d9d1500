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
from ipufs.abi.registers import effect_spans
from ipufs.driver.mapping import PASSTHROUGH, BarMapping
from ipufs.driver.nodes import Node
from ipufs.fuse import replies as rp
from ipufs.fuse.errors import FUSEError
from ipufs.model.profile import Region


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


def of_node(node: Node, devices: DeviceSet, mapping: BarMapping) -> dict[bytes, bytes]:
    facts = {
        b"user.ipufs.ipu": str(node.ipu).encode(),
        b"user.ipufs.region": node.region.value.encode(),
        # What the compatibility library reports as st_rdev (docs/compat.md).
        b"user.ipufs.rdev": f"{os.major(node.rdev)}:{os.minor(node.rdev)}".encode(),
    }
    if node.region is Region.CONFIG:
        facts[b"user.ipufs.mmio"] = mmio(devices, mapping)
    return facts


def mmio(devices: DeviceSet, mapping: BarMapping) -> bytes:
    """What the compatibility library traps in a mapping of config space
    (docs/compat.md): whether loads from the mapping see every effect at
    once (passthrough: the daemon's own pages) or must be trapped too (the
    page cache's copy may lag), and the ranges whose stores act."""
    profile = devices.profile
    loads = "direct" if mapping.settle() == PASSTHROUGH else "trapped"
    spans = effect_spans(profile.tdi_tile_base, profile.tdi_tile_span)
    return " ".join([f"loads={loads}", *(f"{lo:#x}-{hi:#x}" for lo, hi in spans)]).encode()


def sized(value: bytes, size: int) -> rp.Data | rp.XattrSize:
    """The answer to a GETXATTR or LISTXATTR of ``size`` for ``value``."""
    if size == 0:
        return rp.XattrSize(len(value))
    if size < len(value):
        raise FUSEError(errno.ERANGE)
    return rp.Data(value)
