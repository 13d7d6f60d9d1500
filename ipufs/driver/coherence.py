# How a model-side write reaches clients' mappings. With passthrough the
# client maps the daemon's own pages: nothing to do. In page-cache mode the
# client sees a copy in the kernel's page cache, so the driver pushes each
# dirty range into it with FUSE_NOTIFY_STORE (or drops the cached pages with
# FUSE_NOTIFY_INVAL_INODE when the range is large).
from __future__ import annotations

from collections.abc import Callable

from ipufs.driver.devices import DeviceSet
from ipufs.driver.nodes import NodeTree
from ipufs.fuse import replies as rp

#: Above this many dirty bytes of one region, invalidate instead of store.
STORE_LIMIT = 1 << 20


class PageCachePublisher:
    """Drains the model's dirty ranges and sends them to the kernel."""

    def __init__(self, devices: DeviceSet, tree: NodeTree, notify: Callable[[bytes], None]) -> None:
        self.devices = devices
        self.tree = tree
        self.notify = notify

    def publish(self) -> None:
        for ipu in self.devices.ipus:
            for region, memory in ipu.memory.items():
                dirty = memory.take_dirty()
                if not dirty:
                    continue
                ino = self.tree.node(ipu.index, region).ino
                if sum(n for _, n in dirty) > STORE_LIMIT:
                    self.notify(rp.notify_inval_inode(ino, 0, 0))
                    continue
                for offset, length in _merge(dirty):
                    view = memory.bytes[offset : offset + length]
                    self.notify(rp.notify_store(ino, offset, view.tobytes()))


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Coalesce overlapping or touching (offset, length) ranges."""
    merged: list[list[int]] = []
    for start, length in sorted(ranges):
        end = start + length
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e - s) for s, e in merged]
