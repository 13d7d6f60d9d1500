# The native fast path (native/src/fastpath.c, ipufs/driver/fast_path.py)
# against the Python path, in process: the same request bytes go to the
# native function and to the Session, and wherever the native function
# answers, its reply must be the Session's byte for byte. What it must
# leave to Python (holds, files it does not know, a change of the
# mailbox header under way) it must leave. tests/integration/
# test_fast_path_mount.py runs a stream through a mount, fast on and off.
from __future__ import annotations

import errno
import itertools
import os
import struct
import sys
from collections.abc import Iterator
from types import FrameType

import pytest

from ipufs import native
from ipufs.abi import icu
from ipufs.abi import ioctls as abi
from ipufs.abi.icu import Op, op_word
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


@pytest.fixture
def rig() -> Iterator[Rig]:
    devices = DeviceSet(PROFILES["ipu1"], 2)
    rig = Rig(devices, events=Events(enabled=False), accesses=Counting(), fast=True)
    rig.processes.spawn(APP)
    yield rig
    devices.close()


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


def both(rig: Rig, request: bytes) -> tuple[bytes | None, bytes]:
    """The fast path's reply (None: handed to Python), then the Session's."""
    assert rig.fast is not None
    fast = rig.fast.path.answer(request)
    python = rig.kernel.session.handle(request)
    assert python is not None
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
    assert qualifying() == {"MAILBOX_READ_ONLY": native.FastAnswer.MAILBOX_COUNT,
                            "MAILBOX_GET_OFFSETS": native.FastAnswer.MAILBOX_OFFSETS}


@pytest.mark.parametrize("waiting", [0, 1, 3])
def test_every_reply_of_the_fast_path_is_the_python_paths_byte_for_byte(rig: Rig, waiting: int) -> None:
    fhs = [open_node(rig, "ipu0_mailbox"), open_node(rig, "ipu1", os.O_RDONLY), open_node(rig, "ipu1_ex"),
           9999]  # and a handle nobody opened: Python's EBADF
    queue_responses(rig, 0, waiting)
    queue_responses(rig, 1, waiting)
    answered = []
    for request in stream(rig, fhs):
        fast, python = both(rig, request)
        if fast is not None:
            assert fast == python, (request.hex(), fast.hex(), python.hex())
            answered.append(fk.decode_reply(fast))
        queue_responses(rig, 0, waiting - rig.devices.ipus[0].icu.responses_waiting)  # what Python popped
        queue_responses(rig, 1, waiting - rig.devices.ipus[1].icu.responses_waiting)
    # It answered the counts, the offsets and, with nothing waiting, EAGAIN.
    errors = {r.error for r in answered}
    assert errors == ({0, errno.EAGAIN} if waiting == 0 else {0})
    assert len(answered) > 50
    assert rig.fast is not None and rig.fast.answered == len(answered)


def test_the_count_is_the_responses_waiting_and_the_offsets_the_rings(rig: Rig) -> None:
    fh = open_node(rig, "ipu1_mailbox")
    queue_responses(rig, 1, 5)
    rig.devices.ipus[1].icu.pop_response()
    count = fk.decode_reply(both(rig, message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 8)))[0] or b"")
    assert struct.unpack("<iIIIQ", count.payload) == (0, 0, 0, 0, 4)
    offsets = fk.decode_reply(both(rig, message(rig, fh, abi.ioc(abi.Dir.READ, OFFSETS, 16)))[0] or b"")
    assert struct.unpack_from("<4I", offsets.payload, 16) == (icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING,
                                                              icu.SLOTS)


def test_a_message_read_with_a_response_waiting_is_pythons_to_pop(rig: Rig) -> None:
    fh = open_node(rig, "ipu0")
    queue_responses(rig, 0, 1)
    fast, python = both(rig, message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 20)))
    assert fast is None and fk.decode_reply(python).error == 0
    assert rig.devices.ipus[0].icu.responses_waiting == 0


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
    words = bytearray(4096)
    sequence = bytearray(4)
    path.ioctl_type(abi.IOCTL_TYPE)
    path.ioctl(READ_ONLY, native.FastAnswer.MAILBOX_COUNT, needs_write=True)
    path.rings(1, 2, 3, 4, icu.Header.RESPONSE_HEAD // 4)
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
    watched = {icu_model.__file__, memory.__file__}

    def probe(frame: FrameType, event: str, arg: object) -> object:
        if frame.f_code.co_filename not in watched:
            return None
        if event == "line":
            reply = fast.path.answer(request)
            seen.append(None if reply is None else struct.unpack_from("<Q", reply, 32)[0])
        return probe

    head = struct.pack("<II", 3, 1)  # RESPONSE_HEAD 3, RESPONSE_TAIL 1: two responses waiting
    sys.settrace(probe)
    try:
        for change in (model.icu.format, model.icu.clear,
                       lambda: model.icu.host_write(icu.Header.RESPONSE_HEAD, head)):
            model.icu.host_write(icu.Header.RESPONSE_HEAD, head)
            change()
    finally:
        sys.settrace(None)
    counts = {c for c in seen if c is not None}
    assert counts <= {0, 2} and counts, counts  # before or after a change, never between
    assert None in seen  # a change was under way: Python's


def test_a_request_answered_natively_keeps_its_ipu_busy_for_the_register_watcher(rig: Rig) -> None:
    assert rig.fast is not None
    fh = open_node(rig, "ipu1_mailbox")
    rig.use.last.clear()  # as if the Python path had seen nothing for long
    assert not rig.use.busy((1,), 1.0)
    assert rig.fast.path.answer(message(rig, fh, abi.ioc(abi.Dir.READ, READ_ONLY, 8))) is not None
    assert rig.use.busy((1,), 1.0) and not rig.use.busy((0,), 1.0)
