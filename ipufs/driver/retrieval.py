# Stores clients make through mappings in page-cache mode. There a client's
# mapping of ipuN or ipuN_mailbox maps the kernel's page cache, not the
# daemon's memory, so a doorbell or a mailbox post stored through it would
# reach the device only when the kernel writes the page back (msync, munmap,
# periodic writeback). FUSE_NOTIFY_RETRIEVE asks the kernel what its cached
# pages hold; the answer comes back as a NOTIFY_REPLY request.
#
# A retrieval of one IPU is a batch: one RETRIEVE per page that holds
# registers whose stores the device acts on (the config space pages with a
# register that is not plain read-write; the mailbox header and request
# ring), and the last page asked for is its
# end marker: it is asked of a node a file is open on, which the kernel
# always answers (a page of a node never opened gets no answer at all). Every notification goes through the one writer thread in
# order, behind the stores that pushed the model's own writes, so when the
# kernel reads a page it holds everything the model wrote up to the moment
# the batch was started, plus what clients stored. A snapshot of the
# model's memory taken at that moment (under the daemon's lock) therefore
# tells client stores apart: the words that differ. They are stored into
# the model, which then acts as on any host store (commands run, read-only
# registers restored). One batch per IPU is in flight; requests that must
# see clients' stores first wait for the next (docs/filesystem.md).
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ipufs.abi import icu
from ipufs.abi.registers import REGISTERS, Access
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.nodes import NodeTree
from ipufs.fuse import replies as rp
from ipufs.model.profile import Region

log = logging.getLogger(__name__)

PAGE = 4096


def _pages(end: int) -> tuple[int, ...]:
    return tuple(range(0, (end + PAGE - 1) // PAGE * PAGE, PAGE))


#: The pages of each node a host stores registers to through a mapping and
#: the device must see: a plain read-write register only holds what is
#: stored, so a page of nothing else is not asked for (the exchange-buffer
#: controls' pages up to 0x1D404 would triple a batch: 30 pages, which FUSE
#: over io_uring no longer answered in time in page-cache mode).
WATCHED_PAGES: dict[Region, tuple[int, ...]] = {
    Region.CONFIG: tuple(sorted({r.offset // PAGE * PAGE for r in REGISTERS.values() if r.access is not Access.RW})),
    Region.MAILBOX: _pages(icu.REQUEST_RING + icu.SLOTS * icu.SLOT_SIZE),
}


def watched_end(region: Region) -> int:
    """Where the watched pages of a node end (0: none are watched)."""
    pages = WATCHED_PAGES.get(region)
    return pages[-1] + PAGE if pages else 0


@dataclass
class Batch:
    """One retrieval of one IPU's watched pages."""

    ipu: int
    marker: int  # notify_unique of the last page asked for: its answer ends the batch
    #: notify_unique -> (region, offset, what the page cache holds there
    #: but for clients' stores)
    pieces: dict[int, tuple[Region, int, bytes]] = field(default_factory=dict)
    waiters: list[tuple[int, int]] = field(default_factory=list)  # (unique, ino) of postponed requests
    #: What the answers showed clients stored: (region, word indices, values),
    #: stored when the end marker comes, all at once.
    changes: list[tuple[Region, np.ndarray, np.ndarray]] = field(default_factory=list)
    #: A page was being filled while it was retrieved: its answer may be
    #: garbage, so the batch is done again.
    untrusted: bool = False
    #: Every watched page (else the doorbells' pages only: the watcher's poll).
    whole: bool = True


@dataclass
class Finished:
    """A batch whose end marker came back: its IPU, the requests that
    waited for it and whether clients had stored anything."""

    ipu: int
    waiters: list[int]
    stored: bool


#: the first unique of a retrieve (MappedStores._uniques)
FIRST_UNIQUE = 1 << 62


class MappedStores:
    """Retrieves the pages clients store registers to (page-cache mode),
    and stores what they changed into the model. Called under the daemon's
    lock, but for ``_lost`` (the notification writer's thread)."""

    def __init__(self, devices: DeviceSet, tree: NodeTree, use: RegisterUse,
                 notify: Callable[[bytes, Callable[[], None] | None], None]) -> None:
        self.devices = devices
        self.tree = tree
        self.use = use
        self.notify = notify
        # The kernel hands a retrieve's answer over with this number as its
        # unique (over io_uring also the id its entry is committed with):
        # far above the kernel's own request numbers, so that the commit
        # can never complete a live request of the same number instead
        self._uniques = itertools.count(FIRST_UNIQUE)
        self._flight: dict[int, Batch] = {}  # ipu -> its batch in flight
        self._next: dict[int, list[tuple[int, int]]] = {}  # ipu -> (unique, ino) of requests waiting for the next
        self._by_unique: dict[int, Batch] = {}
        self._lost: list[Batch] = []  # batches whose end marker the kernel refused
        self.batches = 0  # retrievals started, for status and benchmarks
        self.words = 0  # words clients stored that retrieval found

    def wait_for(self, ipu: int, unique: int, ino: int) -> None:
        """Request ``unique`` (on an open file of node ``ino``) must see what
        clients stored to ``ipu``'s mappings until now: it waits for a batch
        started from now on."""
        self._forget_lost()
        if ipu in self._flight:
            self._next.setdefault(ipu, []).append((unique, ino))
        else:
            self._start(ipu, [(unique, ino)])

    def start(self, ipu: int) -> bool:
        """Start a light batch for ``ipu`` (the watcher's poll, after the
        model's writes so far were published): only the doorbells' page of
        each open node; a change there starts a whole batch. False when one
        is in flight or no node is open."""
        self._forget_lost()
        if ipu in self._flight:
            return False
        return self._start(ipu, [], whole=False)

    def _start(self, ipu: int, waiters: list[tuple[int, int]], *, whole: bool = True) -> bool:
        open_nodes = self.use.open_nodes(ipu)
        # The last thing asked for ends the batch (the kernel answers in
        # order). With requests waiting, it names the first one's node (its
        # open file pins the inode, so the kernel answers): its last page,
        # or an empty range of it when it holds no registers. Else a page
        # of a node open now; should the kernel refuse that all the same
        # (the node closed meanwhile), the batch is dropped.
        ending = waiters[0][1] if waiters else 0
        nodes = [(region, self.tree.node(ipu, region).ino) for region in WATCHED_PAGES]
        nodes = [(r, ino) for r, ino in nodes if ino in open_nodes and ino != ending] + \
            [(r, ino) for r, ino in nodes if ino == ending]
        memory = self.devices.ipus[ipu].memory
        batch = Batch(ipu, 0, waiters=list(waiters), whole=whole)
        asks: list[tuple[int, int, int, int]] = []  # (unique, ino, offset, size)
        for region, ino in nodes:  # no open file, so no mapping: nothing stored there
            for offset in WATCHED_PAGES[region] if whole else WATCHED_PAGES[region][:1]:
                unique = next(self._uniques)
                batch.pieces[unique] = (region, offset, memory[region].read(offset, PAGE))
                asks.append((unique, ino, offset, PAGE))
        if ending and (not asks or asks[-1][1] != ending):
            asks.append((next(self._uniques), ending, 0, 0))
        if not asks:
            return False
        batch.marker = asks[-1][0]
        for unique, ino, offset, size in asks:
            self._by_unique[unique] = batch
            lost = (lambda: self._lost.append(batch)) if unique == batch.marker else None
            self.notify(rp.notify_retrieve(unique, ino, offset, size), lost)
        self._flight[ipu] = batch
        self.batches += 1
        return True

    def _forget_lost(self) -> None:
        while self._lost:
            batch = self._lost.pop()
            if batch.waiters:  # the kernel refused a node a request holds open: not expected
                log.error("the kernel refused to retrieve ipu%d's pages; asking again", batch.ipu)
                self._next[batch.ipu] = batch.waiters + self._next.get(batch.ipu, [])
            self._finish(batch)

    def _finish(self, batch: Batch) -> None:
        for left in [*batch.pieces, batch.marker]:  # what the kernel did not answer
            self._by_unique.pop(left, None)
        if self._flight.get(batch.ipu) is batch:
            del self._flight[batch.ipu]
        waiting = self._next.pop(batch.ipu, None)
        if waiting and not self._start(batch.ipu, waiting):
            self._next[batch.ipu] = waiting  # no node open to name: the next start takes them

    def reply(self, unique: int, offset: int, data: memoryview) -> Finished | None:
        """A NOTIFY_REPLY: note the words clients changed in that page (stored
        when the batch ends, unless a page of it was being filled);
        the batch when this was its end marker (then the next batch, for
        requests that came meanwhile, is started). Pages reply in the order
        asked: the doorbells' page before the pages a doorbell rings for,
        as a client stores them in the opposite order."""
        batch = self._by_unique.pop(unique, None)
        if batch is None:
            return None
        piece = batch.pieces.pop(unique, None)
        if piece is not None:
            self._compare(batch, piece, offset, data)
        if unique != batch.marker:
            return None
        if batch.untrusted or (batch.changes and not batch.whole):
            # A light batch that found a store, or one with a page being
            # filled: nothing of it is stored, a whole batch follows at
            # once (it sees the same stores: its copy is no newer than
            # what they changed).
            waiting = batch.waiters + self._next.pop(batch.ipu, [])
            self._finish(batch)
            self._start(batch.ipu, waiting)
            return None
        memory = self.devices.ipus[batch.ipu].memory
        for region, where, values in batch.changes:
            memory[region].store_words(where, values)
            self.words += len(where)
        self._finish(batch)
        return Finished(batch.ipu, [u for u, _ in batch.waiters], bool(batch.changes))

    def filled(self, ipu: int, region: Region, offset: int, size: int) -> None:
        """The kernel read [offset, offset+size) of a node (a page being
        filled): a retrieve of those pages in flight may have copied them
        before they were, so its answer for them is not trusted."""
        batch = self._flight.get(ipu)
        if batch is None:
            return
        for r, at, _ in batch.pieces.values():
            if r is region and at < offset + size and offset < at + PAGE:
                batch.untrusted = True

    def _compare(self, batch: Batch, piece: tuple[Region, int, bytes], offset: int, data: memoryview) -> None:
        region, at, before = piece
        n = min(len(data), len(before)) // 4 * 4
        if offset != at or n == 0:
            return
        now = np.frombuffer(data[:n], dtype="<u4")
        then = np.frombuffer(before, dtype="<u4", count=n // 4)
        changed = np.flatnonzero(now != then)
        if len(changed):
            batch.changes.append((region, changed + at // 4, now[changed].astype(np.uint32)))
