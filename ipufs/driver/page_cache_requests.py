# What the filesystem does differently for requests in page-cache mode
# (docs/filesystem.md): a request that must see what clients stored
# through their mappings of registers is postponed until the kernel has
# answered a retrieve of those pages (retrieval.py); a writeback of those
# pages stores nothing; and which replies may wait behind the stores
# notifications queued before them (never one the kernel waits for while
# it holds page locks). Mixed into DeviceNodes, whose state it uses.
from __future__ import annotations

from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import OpenFile
from ipufs.driver.mapping import BarMapping
from ipufs.driver.nodes import Node
from ipufs.driver.retrieval import watched_end
from ipufs.driver.work import DeviceWork
from ipufs.fuse import abi
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import Postponed
from ipufs.model.profile import Region


class MappedStoreRequests:
    """The page-cache side of the filesystem's requests."""

    devices: DeviceSet
    mapping: BarMapping
    work: DeviceWork
    use: RegisterUse
    files: dict[int, OpenFile]

    #: Postponed requests whose retrieval has come back (set by the
    #: filesystem's constructor).
    _cleared: set[int]

    def _see_mapped_stores(self, ipu: int, unique: int, ino: int) -> None:
        """In page-cache mode, postpone a request to an IPU whose config
        space or mailbox is open until what clients stored through their
        mappings has been retrieved, as passthrough would have it in the
        device's memory already (the request is on an open file of node
        ``ino``)."""
        stores = self.mapping.stores
        if stores is None or not self.use.users.get(ipu):
            return
        if unique in self._cleared:
            self._cleared.discard(unique)
            return
        stores.wait_for(ipu, unique, ino)
        raise Postponed

    def _written_back(self, node: Node, req: rq.Write) -> int:
        """How many of a write's first bytes to leave out: for a writeback
        of ``node``'s watched pages (page-cache mode), those that lie in
        them, since there the words clients stored were just retrieved and
        the rest is an old copy of the device's words; 0 for any other
        write."""
        watched = watched_end(node.region)
        if not (req.write_flags & abi.WRITE_CACHE and req.offset < watched and self.mapping.stores is not None
                and self.use.users.get(node.ipu)):
            return 0
        return min(watched - req.offset, len(req.data))

    def reply_may_wait(self, req: rq.Request) -> bool:
        """Every reply but READ's and WRITE's, and also a WRITE (not a
        writeback) to config space or the mailbox: they are opened
        FOPEN_DIRECT_IO, so the kernel holds no page lock for it, and a
        command it ran must be in the caller's mapping on return."""
        if isinstance(req, rq.Write):
            f = self.files.get(req.fh)
            return (f is not None and f.node.region in (Region.CONFIG, Region.MAILBOX)
                    and not req.write_flags & abi.WRITE_CACHE)
        return not isinstance(req, rq.Read)

    def notify_reply(self, req: rq.NotifyReply) -> list[int]:
        stores = self.mapping.stores
        done = None if stores is None else stores.reply(req.unique, req.offset, req.data)
        if done is None:
            return []
        if done.stored:
            # Stores through a mapping: act on them as the register watcher
            # would on shared memory (commands, read-only registers undone).
            acted = self.devices.ipus[done.ipu].poll_registers()
            self.work.done(done.ipu, touched=acted)
        self._cleared.update(done.waiters)
        return done.waiters
