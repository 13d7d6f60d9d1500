# The /dev/fuse transport's wait for a request (DevFuse.receive) over plain pipes
# standing in for the connection and its non-blocking clone: while it
# spins it scans the watcher's shared words and hands what changed to the
# watcher, then goes on waiting; a change with nothing to do stops the
# scanning until the next request, so it cannot keep the reader busy.
# Given a fast path, the native reads (spinning or asleep) answer what it
# takes themselves and return only the rest. The io_uring transport's
# reader (Uring.receive, before its rings start: it reads the connection
# alone) scans the same way while it spins.
from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from ipufs import native
from ipufs.fuse.channel import FuseChannel
from ipufs.fuse.devfuse import DevFuse
from ipufs.fuse.uring import Uring


class Words:
    """A watcher over one word that must be 0."""

    def __init__(self, settles: bool, then: bytes, into: int) -> None:
        self.awake = native.Awake()
        self.words = np.zeros(4, dtype=np.uint32)
        self._index = np.array([2], dtype=np.uint32)
        self._expect = np.zeros(1, dtype=np.uint32)
        self._bell = np.zeros(1, dtype=np.uint32)
        self.watch = native.Watch([(self.words, self._index, self._expect, self._bell, 0)])
        self.settles, self.then, self.into = settles, then, into
        self.calls: list[list[int]] = []

    def current(self) -> native.Watch | None:
        return self.watch

    def changed(self, watch: native.Watch, positions: list[int]) -> bool:
        assert self.awake  # the reader is awake while the watcher acts
        self.calls.append(positions)
        if self.settles:
            self.words[2] = 0
        os.write(self.into, self.then)  # the next request arrives
        return self.settles


Pipes = tuple[tuple[int, int], tuple[int, int]]


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    """(blocking connection, its non-blocking clone), each (read, write)."""
    main, clone = os.pipe(), os.pipe()
    os.set_blocking(clone[0], False)
    try:
        yield main, clone
    finally:
        for fd in (*main, *clone):
            os.close(fd)


def test_a_change_found_while_spinning_is_handed_over_and_the_spin_goes_on(pipes: Pipes) -> None:
    (main_r, _), (clone_r, clone_w) = pipes
    watcher = Words(settles=True, then=b"request", into=clone_w)
    transport = DevFuse(FuseChannel(main_r), spin_for=5.0, mapped=watcher,
                        clone=FuseChannel(clone_r, blocking=False))
    buffer = bytearray(64)
    watcher.words[2] = 1  # a client's store
    assert transport.receive(buffer) == (7, clone_r)
    assert watcher.calls == [[0]]
    assert bytes(buffer[:7]) == b"request"


def test_the_io_uring_reader_hands_a_change_found_while_spinning_over(pipes: Pipes) -> None:
    (main_r, main_w), _ = pipes
    watcher = Words(settles=True, then=b"request", into=main_w)
    transport = Uring(FuseChannel(os.dup(main_r)), spin_for=0.5, mapped=watcher)
    late = threading.Timer(2.0, os.write, (main_w, b"late"))  # a reader that never scans gets this instead
    late.start()
    try:
        buffer = bytearray(64)
        watcher.words[2] = 1  # a client's store
        assert transport.receive(buffer) == (7, transport.device.fd)
        assert watcher.calls == [[0]]  # found by the spin, awake (Words.changed checks)
        assert bytes(buffer[:7]) == b"request"
    finally:
        late.cancel()
        transport.close()
    assert not watcher.awake  # closed: the watcher's thread polls again


def test_a_change_with_nothing_to_do_stops_the_scanning(pipes: Pipes) -> None:
    (main_r, main_w), (clone_r, _) = pipes
    watcher = Words(settles=False, then=b"late", into=main_w)
    transport = DevFuse(FuseChannel(main_r), spin_for=0.02, mapped=watcher,
                        clone=FuseChannel(clone_r, blocking=False))
    buffer = bytearray(64)
    watcher.words[2] = 1  # stays: the model cannot settle it
    # One hand-over, then a plain spin that runs out, then the blocking read.
    assert transport.receive(buffer) == (4, main_r)
    assert watcher.calls == [[0]]
    assert not watcher.awake  # asleep in the blocking read


class Span(Words):
    """A watcher over one word that must be 0 and a span of words that must
    equal their copy (the per-tile TDI registers of an ipu1: 20480 words)."""

    def __init__(self, then: bytes, into: int) -> None:
        super().__init__(settles=True, then=then, into=into)
        self.span = np.zeros(20480, dtype=np.uint32)
        self.copy = np.zeros(20480, dtype=np.uint32)
        self.watch = native.Watch([(self.words, self._index, self._expect, self._bell, 0, self.span, self.copy)])

    def changed(self, watch: native.Watch, positions: list[int]) -> bool:
        self.copy[:] = self.span  # acted on
        return super().changed(watch, positions)


def test_a_store_anywhere_in_a_span_is_found_by_the_watchers_poll_and_by_the_spin(pipes: Pipes) -> None:
    (main_r, _), (clone_r, clone_w) = pipes
    watcher = Span(then=b"request", into=clone_w)
    assert watcher.watch.wait(0.0001, 0.01, watcher.awake) == []
    watcher.span[20479] = 5  # the last word: the poll compares it all at once
    assert watcher.watch.wait(0.0001, 1.0, watcher.awake) == [0]
    watcher.copy[20479] = 5
    transport = DevFuse(FuseChannel(main_r), spin_for=5.0, mapped=watcher,
                        clone=FuseChannel(clone_r, blocking=False))
    watcher.span[12345] = 7  # the spin compares a part per try, and comes round to it
    assert transport.receive(bytearray(64)) == (7, clone_r)
    assert watcher.calls == [[0]]


def _fast_path() -> tuple[native.FastPath, bytes, bytes]:
    """A fast path that knows one open file (handle 1 on IPU 0) and answers
    MAILBOX_READ_ONLY's count (0x8008ED1D); a request it answers and one
    it does not (GETATTR)."""
    fast = native.FastPath(1)
    fast.ioctl_type(0xED)
    fast.ioctl(29, native.FastAnswer.MAILBOX_READ, needs_write=False)
    fast.rings(0x1000, 64, 0x2000, 64, 32, 0x48 // 4, 0x54 // 4, 1)
    # A mailbox with no response waiting (the fast path keeps the buffers alive).
    fast.mailbox(0, np.zeros(4096, dtype=np.uint32), np.zeros(1, dtype=np.uint32))
    fast.opened(1, 0, writable=True)
    fast.hold(0)
    ioctl = struct.pack("<IIQQIIIHH", 72, 39, 2, 2, 0, 0, 1, 0, 0) + struct.pack("<QIIQII", 1, 0, 0x8008ED1D, 0, 0, 8)
    getattr_ = struct.pack("<IIQQIIIHH", 56, 3, 4, 1, 0, 0, 1, 0, 0) + bytes(16)
    return fast, ioctl, getattr_


@pytest.mark.parametrize("where", ["spinning", "asleep"])
def test_the_fast_path_answers_in_the_native_read_and_only_the_rest_comes_back(where: str) -> None:
    """Over message-preserving sockets standing in for the connection and
    its clone: a request the fast path takes is answered on the socket it
    came from and never returned; the next one is."""
    fast, ioctl, getattr_ = _fast_path()
    main, clone = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET), \
        socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        clone[0].setblocking(False)
        kernel = clone[1] if where == "spinning" else main[1]
        kernel.send(ioctl)
        kernel.send(getattr_)
        transport = DevFuse(FuseChannel(main[0].fileno()), spin_for=0.001 if where == "asleep" else 5.0,
                            clone=FuseChannel(clone[0].fileno(), blocking=False), fast=fast)
        buffer = bytearray(256)
        got = transport.receive(buffer)
        assert got == (len(getattr_), (clone if where == "spinning" else main)[0].fileno())
        assert bytes(buffer[:len(getattr_)]) == getattr_
        assert kernel.recv(256) == struct.pack("<IiQ", 40, 0, 2) + struct.pack("<iIIIQ", 0, 0, 0, 0, 0)
        assert fast.answered == 1
    finally:
        for s in (*main, *clone):
            s.close()  # the FuseChannels are not closed: the sockets own the descriptors
