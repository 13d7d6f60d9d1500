# A writeback in page-cache mode (docs/filesystem.md): the kernel writes
# back a client's dirty pages of config space or the mailbox. In the
# watched pages the clients' stores were retrieved before (the write waits
# for that retrieval); the part past them is stored into the model once,
# as one access, one traced write; the rest of the write is an old copy
# and stores nothing.
from __future__ import annotations

import os
import struct

from ipufs.driver.devices import DeviceSet
from ipufs.driver.events import RegisterWrite
from ipufs.driver.retrieval import PAGE, watched_end
from ipufs.fuse import abi
from ipufs.fuse import requests as rq
from ipufs.model.profile import PROFILES, Region
from tests.driver.rig import Events, Rig
from tests.fuse import fakekernel as fk
from tests.fuse.test_postponed import notify_reply

APP = 500


class Accesses:
    """Fault plans' access counter: the IPUs of the accesses counted."""

    counting = True

    def __init__(self) -> None:
        self.seen: list[int] = []

    def count(self, ipu: int) -> None:
        self.seen.append(ipu)


def _rig() -> tuple[Rig, Accesses, int]:
    """One ipu2 in page-cache mode with its config space open (so writes
    to it wait for a retrieval); the open file's handle."""
    accesses = Accesses()
    rig = Rig(DeviceSet(PROFILES["ipu2"], 1), passthrough=False, events=Events(), accesses=accesses)
    rig.processes.spawn(APP)
    reply = rig.kernel.call(rq.Open, rig.fs.tree.node(0, Region.CONFIG).ino, os.O_RDWR, ctx=rig.as_process(APP))
    assert reply.error == 0, reply
    return rig, accesses, int.from_bytes(reply.payload[:8], "little")


def _write_back(rig: Rig, fh: int, offset: int, data: bytes) -> int:
    """A writeback of config space as the kernel sends it (WRITE_CACHE),
    with the retrieval it waits for answered from the model's own bytes
    (no client stored anything in the watched pages); what the reply says
    was written."""
    session, unique = rig.kernel.session, rig.kernel.next_unique()
    ino = rig.fs.tree.node(0, Region.CONFIG).ino
    write = rq.Write(unique, ino, rig.as_process(APP), fh, offset, memoryview(data), abi.WRITE_CACHE, 0)
    assert session.handle(fk.encode(write)) is None  # waits for the retrieval
    asked, rig.stub.notes = rig.stub.notes, []
    for message in asked:
        notify_unique, nodeid, at, size, _ = abi.NOTIFY_RETRIEVE.unpack_from(message, abi.OUT_HEADER.size)
        node = rig.fs.tree.by_ino(nodeid) if size else None
        cached = rig.devices.ipus[0].memory[node.region].read(at, size) if node is not None else b""
        assert session.handle(notify_reply(notify_unique, nodeid, at, cached)) is None
    [(frame, _, _)] = session.outbox
    session.outbox.clear()
    reply = fk.decode_reply(frame)
    assert (reply.unique, reply.error) == (unique, 0), reply
    return int(struct.unpack_from("<I", reply.payload)[0])


def test_a_writeback_past_the_watched_pages_reaches_the_model_once() -> None:
    rig, accesses, fh = _rig()
    watched = watched_end(Region.CONFIG)
    config = rig.devices.ipus[0].memory[Region.CONFIG]
    old = config.read(watched - PAGE, PAGE)  # the page cache's copy of a watched page
    new = bytes(range(256)) * (PAGE // 256)
    accesses.seen.clear()
    assert _write_back(rig, fh, watched - PAGE, old + new) == 2 * PAGE
    assert accesses.seen == [0]
    writes = [e for e in rig.events.seen if isinstance(e, RegisterWrite)]
    assert [(e.offset, len(e.data)) for e in writes] == [(watched, PAGE)]
    assert config.read(watched, PAGE) == new


def test_a_writeback_of_watched_pages_only_stores_nothing() -> None:
    rig, accesses, fh = _rig()
    assert watched_end(Region.CONFIG) >= PAGE
    accesses.seen.clear()
    stale = bytes(PAGE)  # an old copy of the first page: the identity registers there are not zero
    assert _write_back(rig, fh, 0, stale) == PAGE
    assert accesses.seen == []
    assert not [e for e in rig.events.seen if isinstance(e, RegisterWrite)]
    assert rig.devices.ipus[0].memory[Region.CONFIG].read(0, PAGE) != stale
