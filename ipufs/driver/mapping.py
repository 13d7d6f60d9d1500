# How BARs reach clients' mappings: FUSE passthrough where the kernel and
# our privileges allow it (an open hands the kernel a backing file, so mmap
# maps the daemon's own pages), else the page cache, where model-side
# writes are pushed to clients (ipufs/driver/coherence.py) and clients'
# stores through mappings are retrieved (ipufs/driver/retrieval.py). The switch
# happens once, to the page cache, with a reason `ipufs doctor` and the
# root's user.ipufs.mode_reason attribute show (docs/filesystem.md).
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ipufs.driver.activity import RegisterUse
from ipufs.driver.coherence import PageCachePublisher
from ipufs.driver.devices import DeviceSet
from ipufs.driver.nodes import Node, NodeTree
from ipufs.driver.retrieval import MappedStores
from ipufs.fuse import abi
from ipufs.fuse.operations import Negotiated
from ipufs.model.profile import Region

log = logging.getLogger(__name__)

PASSTHROUGH = "passthrough"
PAGE_CACHE = "page-cache"


class Kernel(Protocol):
    """What the driver asks of the kernel outside replies (implemented by
    ipufs.fuse.kernel.KernelLink)."""

    def backing_open(self, fd: int) -> int: ...

    def notify(self, message: bytes, lost: Callable[[], None] | None = None) -> None: ...

    def call_after(self, action: Callable[[], None]) -> bool: ...


class BarMapping:
    """The mode BARs are served in, and what serving them so needs."""

    def __init__(self, devices: DeviceSet, tree: NodeTree, kernel: Kernel, *, passthrough: bool,
                 use: RegisterUse) -> None:
        self.devices = devices
        self.use = use  # which register nodes are open: the filesystem's, retrieval reads it
        self.tree = tree
        self.kernel = kernel
        self.wanted = passthrough
        self.mode = PASSTHROUGH if passthrough else PAGE_CACHE
        self.reason = "" if passthrough else "passthrough switched off (--no-passthrough)"
        self.publisher: PageCachePublisher | None = None
        self.stores: MappedStores | None = None
        self._backing_ids: dict[int, int] = {}

    def init(self, negotiated: Negotiated) -> None:
        """Settle the mode on the terms INIT agreed."""
        if self.wanted and not negotiated.passthrough:
            self.fall_back("the kernel did not offer FUSE_PASSTHROUGH (Linux 6.9+ with "
                           "CONFIG_FUSE_PASSTHROUGH is needed)")
        elif self.mode == PAGE_CACHE:
            self.fall_back(self.reason)


    def settle(self) -> str:
        """The mode, settled: while no open has registered a backing file
        yet, register the first one now (the kernel accepts it once INIT is
        answered), so that the mode a mount reports before its first open
        (user.ipufs.mode, status) is the one opens will get; a daemon
        without CAP_SYS_ADMIN falls back here."""
        if self.mode == PASSTHROUGH and not self._backing_ids and len(self.devices):
            self._backing_id(self.tree.node(0, Region.CONFIG))
        return self.mode

    def fall_back(self, reason: str) -> None:
        self.mode = PAGE_CACHE
        self.reason = reason
        log.warning("serving BARs through the page cache: %s", reason)
        self.devices.track_dirty(True)
        self.publisher = PageCachePublisher(self.devices, self.tree, self.kernel.notify)
        if self.stores is None:
            self.stores = MappedStores(self.devices, self.tree, self.use, self.kernel.notify)

    def publish(self) -> None:
        """Make model-side writes visible to clients (page-cache mode)."""
        if self.publisher is not None:
            self.publisher.publish()

    def open_flags(self, node: Node) -> tuple[int, int]:
        """FOPEN_* flags and backing id for an open of ``node``. Every file
        gets FOPEN_NOFLUSH: nothing needs doing at close, and without it
        the kernel sends FLUSH at every close until it has seen the first
        ENOSYS, so a close on a fresh connection could wait on a hung
        daemon (uninterruptibly)."""
        trapped = node.region in (Region.CONFIG, Region.MAILBOX) or self.devices.persistent
        flags = abi.OpenFlag.NOFLUSH | (abi.OpenFlag.DIRECT_IO if trapped else abi.OpenFlag(0))
        if self.mode == PASSTHROUGH:
            backing_id = self._backing_id(node)
            if backing_id is not None:
                return int(flags | abi.OpenFlag.PASSTHROUGH), backing_id
        return int(flags), 0

    def _backing_id(self, node: Node) -> int | None:
        backing_id = self._backing_ids.get(node.ino)
        if backing_id is not None:
            return backing_id
        bf = self.devices.backing[node.ipu, node.region]
        try:
            backing_id = self.kernel.backing_open(bf.fd)
        except OSError as exc:
            self.fall_back(f"FUSE_DEV_IOC_BACKING_OPEN failed: {exc.strerror} "
                           "(passthrough needs CAP_SYS_ADMIN)")
            return None
        self._backing_ids[node.ino] = backing_id
        return backing_id
