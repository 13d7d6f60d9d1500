# The register watcher: a store through a mapping of config space (or of
# the mailbox's DOORBELL word) reaches no daemon code, so the registers of
# every IPU whose config space or mailbox is open are polled. Detection is
# native code (ipufs.native.Watch) that compares the words with what the
# model expects, without holding the GIL. Two threads do it:
# - the FUSE transport, between its tries while it spins awaiting the next
#   request (this is its MappedMemory, ipufs/fuse/transport.py; the
#   /dev/fuse one is ipufs/fuse/devfuse.py, the io_uring one
#   ipufs/fuse/uring.py): a store is seen within a
#   system call's time while requests keep coming;
# - the watcher's own thread, while the reader sleeps: every FAST seconds
#   while an IPU has been active within the last BUSY seconds and every
#   IDLE seconds otherwise. While the reader is awake this thread sleeps
#   (on native.Awake), for its wake-ups on the reader's CPU would delay
#   requests: every 100 µs they once made one ioctl round trip in six
#   take 13 µs longer.
# Either acts at once under the daemon's lock. In page-cache mode the stores
# are in the kernel's page cache instead, and this thread asks the kernel
# for the watched pages on the same schedule (ipufs/driver/retrieval.py). This is the latency bound
# of a mapped command (docs/registers.md; benchmarks/).
from __future__ import annotations

import logging
import threading

import trio

from ipufs import native
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.retrieval import MappedStores
from ipufs.driver.work import DeviceWork

log = logging.getLogger(__name__)

FAST = 100e-6
IDLE = 10e-3
BUSY = 1.0
#: Longest stretch the native detector runs before the thread looks again
#: at which IPUs are open, whether they are busy, and whether to stop.
ROUND = 20e-3


class RegisterWatcher:
    """Watches the registers of the IPUs ``use`` says are open, and lets
    the model act on stores, each IPU's a unit of ``work``."""

    def __init__(self, devices: DeviceSet, use: RegisterUse, work: DeviceWork, *,
                 fast: float = FAST, idle: float = IDLE, busy: float = BUSY) -> None:
        self.devices = devices
        self.use = use
        self.work = work
        self.lock = work.lock
        self.fast, self.idle, self.busy = fast, idle, busy
        self.actions = 0  # IPUs that acted on a stored register
        self._stop = threading.Event()
        self.awake = native.Awake()
        # The watch and the IPUs it watches, in its order; replaced whole.
        self._now: tuple[native.Watch, tuple[int, ...]] = (native.Watch([]), ())

    def act(self, indices: list[int]) -> list[int]:
        """Let the model act on what the host stored (any thread); returns
        the IPUs that had something to do."""
        ipus, acted = self.devices.ipus, []
        with self.lock:
            for index in indices:
                if index < len(ipus) and ipus[index].poll_registers():
                    self.work.done(index, touched=True)  # (under the lock, as act() would)
                    acted.append(index)
        self.actions += len(acted)
        return acted

    def _refresh(self) -> tuple[native.Watch, tuple[int, ...]]:
        """The IPUs whose registers a client may store to, and their native
        watch, rebuilt when that set changed."""
        with self.lock:
            watched = tuple(self.use.watched())
        if watched != self._now[1]:
            ipus = self.devices.ipus
            self._now = (native.Watch([ipus[i].watched_words() for i in watched]), watched)
        return self._now

    # --- what the FUSE transport scans while it waits (fuse.transport.MappedMemory) ---
    def current(self) -> native.Watch | None:
        """What the spinning reader scans: nothing in page-cache mode, where
        clients' stores are in the page cache and retrieval brings them."""
        if self.work.effects.mapping.stores is not None:
            return None
        watch, watched = self._now
        return watch if watched else None

    def changed(self, watch: native.Watch, positions: list[int]) -> bool:
        now, watched = self._now
        if watch is not now:
            return True  # rebuilt meanwhile: the new watch is scanned next
        wanted = [watched[w] for w in positions]
        return len(self.act(wanted)) == len(wanted)

    def round(self, timeout: float = ROUND) -> list[int]:
        """One round: wait up to ``timeout`` for watched IPUs to need acting
        on, act on them, and return them."""
        watch, watched = self._refresh()
        if not watched:
            self._stop.wait(min(timeout, self.idle))
            return []
        period = self.fast if self.use.busy(watched, self.busy) else self.idle
        stores = self.work.effects.mapping.stores
        if stores is not None:
            return self._retrieve(stores, watched, period)
        ready = watch.wait(period, timeout, self.awake)
        wanted = [watched[w] for w in ready]
        if wanted and len(self.act(wanted)) < len(wanted):
            # Found, but nothing to do (a read-only register restored, or a
            # word the model cannot settle): wait a period, so that such a
            # word never turns the watcher into a loop starving the reader.
            self._stop.wait(period)
        return wanted

    def _retrieve(self, stores: MappedStores, watched: tuple[int, ...], period: float) -> list[int]:
        """Page-cache mode: clients' stores are in the kernel's page cache,
        not in the memory the native watch compares; ask the kernel for the
        watched pages of each IPU every ``period`` (retrieval.py: the reader
        stores what changed and acts on it when the answers come)."""
        with self.lock:
            started = [index for index in watched if stores.start(index)]
        self._stop.wait(period)
        return started

    def _watch(self) -> None:
        native.thread_slice(native.SHORTEST_SLICE_S)  # woken, it takes a CPU from the tiles at once
        try:
            while not self._stop.is_set():
                self.round()
        except BaseException:
            log.exception("the register watcher failed")

    async def run(self) -> None:
        self._stop.clear()
        thread = threading.Thread(target=self._watch, name="ipufs-registers", daemon=True)
        thread.start()
        try:
            await trio.sleep_forever()
        finally:
            self._stop.set()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(thread.join, ROUND + 1.0)
