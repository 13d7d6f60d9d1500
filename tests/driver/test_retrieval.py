# Clients' stores through page-cache mappings, fetched with retrieve
# notifications (ipufs/driver/retrieval.py), with the kernel played by the
# test: the words that differ from the copy taken when a batch is started
# are stored when its end marker comes, and a batch with a page being
# filled meanwhile is done again rather than half applied.
from __future__ import annotations

import struct
from collections.abc import Callable

from ipufs.abi import icu
from ipufs.abi.registers import REGISTERS
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.nodes import ROOT_INO, NodeTree
from ipufs.driver.retrieval import PAGE, WATCHED_PAGES, MappedStores
from ipufs.fuse import abi
from ipufs.model.profile import PROFILES, Region


class Kernel:
    """Holds the page cache of the nodes as bytes, answers retrieves."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, int, int]] = []  # (notify_unique, ino, offset, size)
        self.lost: list[Callable[[], None]] = []

    def notify(self, message: bytes, lost: Callable[[], None] | None = None) -> None:
        _, code, _ = abi.OUT_HEADER.unpack_from(message)
        assert code == abi.NotifyCode.RETRIEVE
        unique, ino, offset, size, _ = abi.NOTIFY_RETRIEVE.unpack_from(message, abi.OUT_HEADER.size)
        self.sent.append((unique, ino, offset, size))
        if lost is not None:
            self.lost.append(lost)


def rig() -> tuple[DeviceSet, NodeTree, RegisterUse, Kernel, MappedStores]:
    devices = DeviceSet(PROFILES["ipu1"], 1)
    tree, use, kernel = NodeTree(1), RegisterUse(), Kernel()
    for region in (Region.CONFIG, Region.MAILBOX):
        use.opened(0, tree.node(0, region).ino)
    return devices, tree, use, kernel, MappedStores(devices, tree, use, kernel.notify)


def answer(stores: MappedStores, kernel: Kernel, cache: dict[tuple[int, int], bytes]):  # type: ignore[no-untyped-def]
    """The kernel's NOTIFY_REPLYs, in the order asked; the last is the end marker's."""
    result = None
    sent, kernel.sent = kernel.sent, []  # what is asked while answering waits for the next call
    for unique, ino, offset, size in sent:
        data = cache.get((ino, offset), b"") if ino != ROOT_INO and size else b""
        result = stores.reply(unique, offset, memoryview(data))
    return result


def page_of(devices: DeviceSet, region: Region, offset: int) -> bytearray:
    return bytearray(devices.ipus[0].memory[region].read(offset, PAGE))


def test_a_post_and_doorbell_stored_through_the_mapping_reach_the_mailbox_at_the_end_marker() -> None:
    devices, tree, _, kernel, stores = rig()
    mailbox = tree.node(0, Region.MAILBOX).ino
    stores.wait_for(0, unique=100, ino=mailbox)
    # Retrieved in order, each node's doorbell page first; the waiting
    # request's node last (its open file pins it in the kernel), whose last
    # answer ends the batch.
    assert [(ino, off) for _, ino, off, _ in kernel.sent] == \
        [(tree.node(0, r).ino, o) for r in (Region.CONFIG, Region.MAILBOX) for o in WATCHED_PAGES[r]]
    header, ring = page_of(devices, Region.MAILBOX, 0), page_of(devices, Region.MAILBOX, icu.REQUEST_RING)
    icu.MESSAGE.pack_into(ring, 0, icu.op_word(icu.Op.READ_FIRMWARE_VERSION), 0, 0, 0, 0)
    struct.pack_into("<I", header, icu.Header.REQUEST_HEAD, 1)
    struct.pack_into("<I", header, icu.Header.DOORBELL, 1)
    done = answer(stores, kernel, {(mailbox, 0): bytes(header), (mailbox, icu.REQUEST_RING): bytes(ring)})
    assert done is not None and done.waiters == [100] and done.stored
    memory = devices.ipus[0].memory[Region.MAILBOX]
    assert memory.read(icu.Header.DOORBELL, 4) == struct.pack("<I", 1)
    assert memory.read(icu.REQUEST_RING, 4) == struct.pack("<I", icu.op_word(icu.Op.READ_FIRMWARE_VERSION))


def test_words_the_model_changed_after_the_copy_are_not_taken_for_stores() -> None:
    devices, tree, _, kernel, stores = rig()
    config = tree.node(0, Region.CONFIG).ino
    stale = page_of(devices, Region.CONFIG, 0)  # the page cache, before the model's next store lands
    assert stores.start(0)
    scratch = REGISTERS["SCRATCH"].offset
    devices.ipus[0].memory[Region.CONFIG].write(scratch, struct.pack("<I", 5))  # the model, after the copy
    done = answer(stores, kernel, {(config, 0): bytes(stale)})
    assert done is not None and not done.stored
    assert devices.ipus[0].memory[Region.CONFIG].read(scratch, 4) == struct.pack("<I", 5)


def test_a_batch_with_a_page_being_filled_is_done_again_and_requests_wait_for_the_next() -> None:
    devices, tree, _, kernel, stores = rig()
    mailbox = tree.node(0, Region.MAILBOX).ino
    stores.wait_for(0, unique=7, ino=mailbox)
    stores.wait_for(0, unique=8, ino=mailbox)  # in flight already: waits for the next batch
    stores.filled(0, Region.MAILBOX, icu.REQUEST_RING, PAGE)  # a fault read that page meanwhile
    garbage = b"\xff" * PAGE
    assert answer(stores, kernel, {(mailbox, 0): garbage, (mailbox, icu.REQUEST_RING): garbage}) is None
    assert devices.ipus[0].memory[Region.MAILBOX].read(0, 4) == struct.pack("<I", icu.MAGIC)  # nothing stored
    assert kernel.sent  # started again at once, for both requests
    done = answer(stores, kernel, {})
    assert done is not None and sorted(done.waiters) == [7, 8]


def test_the_watchers_poll_asks_for_doorbell_pages_only_and_a_store_there_asks_for_all() -> None:
    devices, tree, _, kernel, stores = rig()
    config = tree.node(0, Region.CONFIG).ino
    assert stores.start(0)
    assert [(ino, off) for _, ino, off, _ in kernel.sent] == [(config, 0), (tree.node(0, Region.MAILBOX).ino, 0)]
    quiet = answer(stores, kernel, {})
    assert quiet is not None and not quiet.stored and not kernel.sent  # nothing stored: done
    assert stores.start(0)
    page = page_of(devices, Region.CONFIG, 0)
    struct.pack_into("<I", page, REGISTERS["CMD_RESET"].offset, 1)
    assert answer(stores, kernel, {(config, 0): bytes(page)}) is None  # a store: the whole batch follows
    assert len(kernel.sent) == sum(len(p) for p in WATCHED_PAGES.values())
    assert devices.ipus[0].memory[Region.CONFIG].read(REGISTERS["CMD_RESET"].offset, 4) == bytes(4)
    done = answer(stores, kernel, {(config, 0): bytes(page)})
    assert done is not None and done.stored
    assert devices.ipus[0].memory[Region.CONFIG].read(REGISTERS["CMD_RESET"].offset, 4) == struct.pack("<I", 1)


def test_a_request_on_a_node_without_registers_ends_the_batch_with_an_empty_range_of_it() -> None:
    _, tree, _, kernel, stores = rig()
    exchange = tree.node(0, Region.EXCHANGE).ino  # an ioctl may come on ipuN_ex
    stores.wait_for(0, unique=5, ino=exchange)
    assert kernel.sent[-1][1:] == (exchange, 0, 0)
    done = answer(stores, kernel, {})
    assert done is not None and done.waiters == [5]


def test_a_lost_end_marker_frees_the_ipu_for_the_next_batch() -> None:
    _, _, _, kernel, stores = rig()
    assert stores.start(0)
    assert not stores.start(0)  # one in flight
    kernel.lost[-1]()  # the kernel refused the marker: that node was gone
    assert stores.start(0)


def test_requests_of_a_batch_the_kernel_refused_are_asked_for_again() -> None:
    _, tree, _, kernel, stores = rig()
    stores.wait_for(0, unique=5, ino=tree.node(0, Region.MAILBOX).ino)
    kernel.lost[-1]()  # refused (not expected while the request holds the node open)
    kernel.sent.clear()
    assert not stores.start(0)  # the watcher's next poll finds the request a new batch in flight
    done = answer(stores, kernel, {})
    assert done is not None and done.waiters == [5]
