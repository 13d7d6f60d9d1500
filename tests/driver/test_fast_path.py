# The native fast path (native/src/fastpath.c, ipufs/driver/fast_path.py)
# against the Python path, in process: the same request bytes go to a
# driver stack with the fast path (the native function first) and to one
# without (the Session alone); every reply must be the same byte for
# byte, and so must the mailboxes after. What it must leave to Python
# (holds, files it does not know, a ring being changed) it must leave.
# tests/integration/test_fast_path_mount.py runs a stream through a
# mount, fast on and off.
from __future__ import annotations

import errno
import itertools
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import numpy as np
import pytest

from ipufs import native
from ipufs.abi import icu
from ipufs.abi import ioctls as abi
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.driver.devices import DeviceSet
from ipufs.driver.fast_path import Hold, qualifying
from ipufs.fuse import abi as fabi
from ipufs.fuse import requests as rq
from ipufs.model import icu as icu_model
from ipufs.model import memory
from ipufs.model.profile import PROFILES
from tests.driver.rig import Events, Rig
from tests.fuse import fakekernel as fk

APP = 100
READ_ONLY = abi.BY_NAME["MAILBOX_READ_ONLY"].nr
OFFSETS = abi.BY_NAME["MAILBOX_GET_OFFSETS"].nr


class Counting:
    """An access counter a test switches on (a fault plan in force)."""

    counting = False

    def count(self, ipu: int) -> None:
        pass


def new_rig(fast: bool) -> Rig:
    rig = Rig(DeviceSet(PROFILES["ipu1"], 2), events=Events(enabled=False), accesses=Counting(), fast=fast)
    rig.processes.spawn(APP)
    return rig


@pytest.fixture
def rig() -> Iterator[Rig]:
    """A driver stack with the fast path."""
    rig = new_rig(fast=True)
    yield rig
    rig.devices.close()


@pytest.fixture
def plain() -> Iterator[Rig]:
    """The same without: every request the Python path's."""
    rig = new_rig(fast=False)
    yield rig
    rig.devices.close()


def open_node(rig: Rig, name: str, flags: int = os.O_RDWR) -> int:
    node = rig.fs.tree.by_name(name)
    assert node is not None
    reply = rig.kernel.call(rq.Open, node.ino, flags, ctx=rig.as_process(APP))
    assert reply.error == 0, reply
    return int.from_bytes(reply.payload[:8], "little")


def message(rig: Rig, fh: int, cmd: int, *, data: bytes = b"", out: int | None = None, flags: int = 0,
            arg: int = 0) -> bytes:
    """An IOCTL request as the kernel sends it: the argument bytes it
    carries (_IOW, _IOWR) and room for what it copies back (_IOR, _IOWR)."""
    direction, _, _, size = abi.ioc_fields(cmd)
    if out is None:
        out = size if direction & abi.Dir.READ else 0
    return fk.encode(rq.Ioctl(rig.kernel.next_unique(), 2, rig.as_process(APP), fh, flags, cmd, arg,
                              memoryview(data), out))


def both(rig: Rig, plain: Rig, request: bytes) -> tuple[bytes | None, bytes]:
    """The fast path's reply to ``request`` (None: it handed it to Python,
    which then answered it), and the reply of the Python path alone.
    Whatever each path did to the devices, the mailboxes then hold the
    same bytes."""
    assert rig.fast is not None
    fast = rig.fast.path.answer(request)
    ours = fast if fast is not None else rig.kernel.session.handle(request)
    python = plain.kernel.session.handle(request)
    assert ours == python, (request.hex(), None if ours is None else ours.hex(), python)
    assert python is not None
    for mine, theirs in zip(rig.devices.ipus, plain.devices.ipus, strict=True):
        assert (mine.icu.mailbox.bytes == theirs.icu.mailbox.bytes).all()
    return fast, python


def queue_responses(rig: Rig, ipu: int, n: int) -> None:
    model = rig.devices.ipus[ipu]
    for _ in range(n):
        model.icu.submit((op_word(Op.READ_FIRMWARE_VERSION), 0, 0, 0, 0))


def stream(rig: Rig, fhs: list[int]) -> Iterator[bytes]:
    """Every direction and a range of sizes of the two fast ioctls, and of
    their neighbours, with the argument carried or not, on every file."""
    for fh, nr, direction, size in itertools.product(fhs, (READ_ONLY, OFFSETS, 14, 30),
                                                     range(4), (0, 4, 7, 8, 12, 16, 19, 20, 24, 32)):
        cmd = abi.ioc(direction, nr, size)
        carried = size if direction & abi.Dir.WRITE else 0
        yield message(rig, fh, cmd, data=bytes(range(carried)))
        if carried:
            yield message(rig, fh, cmd, data=bytes(carried - 1))  # the kernel carried less: EINVAL
        if direction & abi.Dir.READ and size:
            yield message(rig, fh, cmd, data=bytes(carried), out=size // 2)  # less room back


def test_the_table_of_fast_requests_is_a_column_of_the_ioctl_table() -> None:
    assert qualifying() == {"MAILBOX_READ_ONLY": native.FastAnswer.MAILBOX_READ,
                            "MAILBOX_GET_OFFSETS": native.FastAnswer.MAILBOX_OFFSETS}


@pytest.mark.parametrize("waiting", [0, 1, 3])
def test_every_reply_of_the_fast_path_is_the_python_paths_byte_for_byte(rig: Rig, plain: Rig,
                                                                        waiting: int) -> None:
    """Every request to both stacks alike; with responses waiting, what a
    read took off the ring is queued again on both."""
    fhs = []
    for name, flags in (("ipu0_mailbox", os.O_RDWR), ("ipu1", os.O_RDONLY), ("ipu1_ex", os.O_RDWR)):
        fhs.append(open_node(rig, name, flags))
        assert open_node(plain, name, flags) == fhs[-1]
    fhs.append(9999)  # and a handle nobody opened: Python's EBADF
    answered = []
    for request in stream(rig, fhs):
        for r in (rig, plain):
            for index in (0, 1):
                queue_responses(r, index, waiting - r.devices.ipus[index].icu.responses_waiting)
        fast, _ = both(rig, plain, request)
        if fast is not None:
            answered.append(fk.decode_reply(fast))
    # It answered counts, offsets and responses, or EAGAIN with none waiting.
    errors = {r.error for r in answered}
    assert errors == ({0, errno.EAGAIN} if waiting == 0 else {0})
    assert any(len(r.payload) == 16 + 20 for r in answered) == (waiting > 0)  # responses taken
    assert len(answered) > 50
    assert rig.fast is not None and rig.fast.answered == len(answered)


def test_the_count_is_the_responses_waiting_and_the_offsets_the_rings(rig: Rig, plain: Rig) -> None:
    assert open_node(rig, "ipu1_mailbox") == open_node(plain, "ipu1_mailbox")
    fh = 1
    for r in (rig, plain):
        queue_responses(r, 1, 5)
        r.devices.ipus[1].icu.pop_response()
    count = fk.decode_reply(both(rig, plain, message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 8)))[0] or b"")
    assert struct.unpack("<iIIIQ", count.payload) == (0, 0, 0, 0, 4)
    offsets = fk.decode_reply(both(rig, plain, message(rig, fh, abi.ioc(abi.Dir.READ, OFFSETS, 16)))[0] or b"")
    assert struct.unpack_from("<4I", offsets.payload, 16) == (icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING,
                                                              icu.SLOTS)


def test_responses_are_taken_off_the_ring_in_order_then_eagain(rig: Rig, plain: Rig) -> None:
    assert open_node(rig, "ipu0") == open_node(plain, "ipu0")
    requests = [(op_word(op), 0, 0, 0, 0) for op in (Op.READ_FIRMWARE_VERSION, Op.READ_BOARD_TYPE,
                                                     Op.READ_HARDWARE_ID)]
    for r in (rig, plain):
        for request in requests:
            r.devices.ipus[0].icu.submit(request)
    replies = [both(rig, plain, message(rig, 1, abi.ioc(abi.Dir.READ, READ_ONLY, 20)))[0] for _ in range(4)]
    assert all(reply is not None for reply in replies)  # all four answered natively
    words = [fk.decode_reply(reply or b"") for reply in replies]
    answers = [rig.devices.ipus[0].icu.handle(request) for request in requests]
    assert [w.payload[16:] for w in words[:3]] == [MESSAGE.pack(*(a or ())) for a in answers]
    assert words[3].error == errno.EAGAIN
    status = rig.devices.ipus[0].icu.mailbox.words[icu.Header.STATUS // 4]
    assert status & icu.STATUS_RESPONSES == 0  # refreshed as the model refreshes it


def test_while_anything_around_a_request_is_active_python_answers_it(rig: Rig) -> None:
    assert rig.fast is not None
    fh = open_node(rig, "ipu0")
    count_request = abi.ioc(abi.Dir.READ, READ_ONLY, 8)
    assert rig.fast.path.answer(message(rig, fh, count_request)) is not None
    accesses = rig.nodes.accesses
    assert isinstance(rig.events, Events) and isinstance(accesses, Counting)

    def trace(on: bool) -> None:
        rig.events.enabled = on

    def count(on: bool) -> None:
        accesses.counting = on

    for switch, bit in ((trace, Hold.TRACED), (count, Hold.COUNTED)):
        switch(True)
        rig.fast.refresh()  # what the tracer and the plan runner call
        assert rig.fast.hold == bit
        assert rig.fs.xattrs(1)[b"user.ipufs.fast_path"].startswith(b"held: ")
        assert rig.fast.path.answer(message(rig, fh, count_request)) is None
        switch(False)
        rig.fast.refresh()
    assert rig.fast.path.answer(message(rig, fh, count_request)) is not None
    assert rig.fs.xattrs(1)[b"user.ipufs.fast_path"] == b"on"
    # Flags the Python path reads differently (compat, unrestricted) and a
    # released file are Python's too.
    for flags in fabi.IoctlFlag:
        assert rig.fast.path.answer(message(rig, fh, count_request, flags=flags)) is None
    rig.kernel.call(rq.Release, 2, fh, 0, 0)
    assert rig.fast.path.answer(message(rig, fh, count_request)) is None


def test_in_page_cache_mode_python_answers_everything() -> None:
    devices = DeviceSet(PROFILES["ipu1"], 1)
    try:
        rig = Rig(devices, events=Events(enabled=False), passthrough=False, fast=True)
        rig.processes.spawn(APP)
        fh = open_node(rig, "ipu0_mailbox")
        assert rig.fast is not None and rig.fast.hold == Hold.PAGE_CACHE
        assert rig.fast.path.answer(message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 8))) is None
    finally:
        devices.close()


def test_the_needs_write_column_sends_a_read_only_open_to_python() -> None:
    path = native.FastPath(1)
    words = bytearray(icu.RESPONSE_RING + icu.SLOTS * icu.SLOT_SIZE)
    sequence = bytearray(4)
    path.ioctl_type(abi.IOCTL_TYPE)
    path.ioctl(READ_ONLY, native.FastAnswer.MAILBOX_READ, needs_write=True)
    path.rings(icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING, icu.SLOTS, icu.SLOT_SIZE,
               icu.Header.RESPONSE_HEAD // 4, icu.Header.STATUS // 4, icu.STATUS_RESPONSES)
    path.mailbox(0, memoryview(words).cast("I"), memoryview(sequence).cast("I"))
    path.hold(0)
    assert path.opened(1, 0, writable=False) and path.opened(2, 0, writable=True)
    assert not path.opened(1 + 4096, 0, writable=True)  # its slot is file 1's: Python serves it

    def ask(fh: int) -> bytes | None:
        header = struct.pack("<IIQQIIIHH", 72, fabi.Opcode.IOCTL, 8, 2, 0, 0, APP, 0, 0)
        return path.answer(header + struct.pack("<QIIQII", fh, 0, abi.ioc(abi.Dir.READ, READ_ONLY, 8), 0, 0, 8))

    assert ask(1) is None and ask(4097) is None and ask(2) is not None
    path.released(2)
    assert ask(2) is None


@contextmanager
def at_every_model_line(action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` at every line the model's ICU and memory code runs on
    this thread (a trace function), so that every step in between is seen."""
    watched = {icu_model.__file__, memory.__file__}

    def probe(frame: FrameType, event: str, arg: object) -> object:
        if frame.f_code.co_filename not in watched:
            return None
        if event == "line":
            action()
        return probe

    sys.settrace(probe)
    try:
        yield
    finally:
        sys.settrace(None)


def test_the_count_is_never_read_torn_while_the_model_rewrites_the_mailbox_header(rig: Rig) -> None:
    """A reset rewrites RESPONSE_HEAD and RESPONSE_TAIL one after the other;
    in between, their difference is no count that ever was. The fast path
    is asked at every line the model's ICU and memory code runs (a trace
    function, so every step in between is seen) and must then answer a
    count of a whole state, or leave the request to Python."""
    assert rig.fast is not None
    fast = rig.fast
    fh = open_node(rig, "ipu0_mailbox")
    request = message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 8))
    model = rig.devices.ipus[0]
    seen: list[int | None] = []

    def ask() -> None:
        reply = fast.path.answer(request)
        seen.append(None if reply is None else struct.unpack_from("<Q", reply, 32)[0])

    head = struct.pack("<II", 3, 1)  # RESPONSE_HEAD 3, RESPONSE_TAIL 1: two responses waiting
    with at_every_model_line(ask):
        for change in (model.icu.format, model.icu.clear,
                       lambda: model.icu.host_write(icu.Header.RESPONSE_HEAD, head)):
            model.icu.host_write(icu.Header.RESPONSE_HEAD, head)
            change()
    counts = {c for c in seen if c is not None}
    assert counts <= {0, 2} and counts, counts  # before or after a change, never between
    assert None in seen  # a change was under way: Python's


def test_no_response_is_taken_natively_while_the_model_changes_the_ring(rig: Rig) -> None:
    """At every line the model's ICU and memory code runs while it queues,
    pops and resets, the fast path is asked to take a response: while the
    model holds the ring it must leave the request to Python; between its
    changes it may take one, and then every response is taken once."""
    assert rig.fast is not None
    fast = rig.fast
    fh = open_node(rig, "ipu0_mailbox")
    request = message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 20))
    model = rig.devices.ipus[0].icu
    during: list[bytes | None] = []
    taken: list[int] = []

    def take() -> None:
        reply = fast.path.answer(request)
        if model._claims:
            during.append(reply)
        elif reply is not None and len(reply) == 32 + 20:
            taken.append(struct.unpack_from("<I", reply, 32)[0])

    with at_every_model_line(take):
        for number in range(1, 40):
            model.queue_response((number, 0, 0, 0, 0))
            if number % 4 == 0:
                popped = model.pop_response()
                if popped is not None:
                    taken.append(popped[0])
            if number == 30:
                waiting_at_reset = model.responses_waiting
                model.clear()
    assert during and all(reply is None for reply in during)
    assert len(set(taken)) == len(taken) and taken == sorted(taken)
    assert len(taken) + waiting_at_reset + model.responses_waiting >= 30  # none lost but those reset away
    assert bool(model.mailbox.words[icu.Header.STATUS // 4] & icu.STATUS_RESPONSES) == bool(model.responses_waiting)


def test_a_claim_of_the_ring_waits_for_the_one_holding_it() -> None:
    sequence = np.zeros(1, dtype=np.uint32)
    claim, release = native.FastPath.claimer(sequence)
    order: list[str] = []
    claim()
    other = threading.Thread(target=lambda: (claim(), order.append("claimed"), release()))
    other.start()
    time.sleep(0.05)  # time for the other thread to reach its claim (an order, not a timing, is checked)
    order.append("releasing")
    release()
    other.join()
    assert order == ["releasing", "claimed"] and sequence[0] == 4


def test_a_request_answered_natively_keeps_its_ipu_busy_for_the_register_watcher(rig: Rig) -> None:
    assert rig.fast is not None
    fh = open_node(rig, "ipu1_mailbox")
    rig.use.last.clear()  # as if the Python path had seen nothing for long
    assert not rig.use.busy((1,), 1.0)
    assert rig.fast.path.answer(message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 8))) is not None
    assert rig.use.busy((1,), 1.0) and not rig.use.busy((0,), 1.0)


def test_responses_popped_natively_and_by_the_model_at_once_are_each_taken_once(rig: Rig) -> None:
    """One thread queues numbered responses and pops some itself (the
    model, claiming the ring); another pops through the fast path. Every
    response is taken exactly once, in order, and the status agrees."""
    assert rig.fast is not None
    fast = rig.fast
    fh = open_node(rig, "ipu0_mailbox")
    request = message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 20))
    model = rig.devices.ipus[0].icu
    total = 20000
    native_took: list[int] = []
    model_took: list[int] = []
    done = threading.Event()

    def pop_natively() -> None:
        while not done.is_set() or model.responses_waiting:
            reply = fast.path.answer(request)
            if reply is not None and len(reply) == 32 + 20:
                native_took.append(struct.unpack_from("<I", reply, 32)[0])

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    popper = threading.Thread(target=pop_natively)
    popper.start()
    dropped = 0
    try:
        for number in range(total):
            if not model.queue_response((number, 1, 2, 3, 4)):
                dropped += 1
            if number % 3 == 0:
                taken = model.pop_response()
                if taken is not None:
                    model_took.append(taken[0])
    finally:
        done.set()
        popper.join()
        sys.setswitchinterval(interval)
    taken = sorted(native_took + model_took)
    assert len(set(taken)) == len(taken) == total - dropped  # none twice, none lost
    assert native_took == sorted(native_took) and model_took == sorted(model_took)
    assert native_took and model_took
    assert model.responses_waiting == 0
    assert model.mailbox.words[icu.Header.STATUS // 4] & icu.STATUS_RESPONSES == 0
