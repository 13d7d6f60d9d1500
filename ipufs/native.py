# Typed wrapper over the cffi module ipufs._native (built from native/).
# OS errors are translated here, once, into OSError with the right errno.
from __future__ import annotations

import enum
import errno
import os
from collections.abc import Callable

from ipufs import _native  # type: ignore[attr-defined]

_lib = _native.lib
_ffi = _native.ffi

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000
CLONE_NEWNS = 0x20000
CLONE_NEWUSER = 0x10000000
MNT_DETACH = 0x2


def _check(result: int, what: str) -> int:
    if result < 0:
        raise OSError(-result, f"{what}: {os.strerror(-result)}")
    return result


def mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    """mount(2)."""
    _check(
        _lib.ipufs_mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode()),
        f"mount {target}",
    )


def umount(target: str, flags: int = 0) -> None:
    """umount2(2)."""
    _check(_lib.ipufs_umount(target.encode(), flags), f"umount {target}")


def pidfd_send_value(pidfd: int, signo: int, value: int) -> None:
    """Queue signal `signo` with `si_code` SI_QUEUE and `si_int` = value to the
    process behind `pidfd` (pidfd_send_signal(2) with a siginfo)."""
    _check(_lib.ipufs_pidfd_send_value(pidfd, signo, value), "pidfd_send_signal")


def signalfd(first: int, last: int) -> int:
    """A non-blocking signalfd for signals ``first``..``last`` (block them
    first with signal.pthread_sigmask)."""
    return _check(_lib.ipufs_signalfd(first, last), "signalfd")


def unshare(flags: int) -> None:
    """unshare(2): CLONE_NEWNS, CLONE_NEWUSER."""
    _check(_lib.ipufs_unshare(flags), "unshare")


def child_setup(deathsig: int, keep_sys_admin: bool = False) -> None:
    """In a child before exec: die with ``deathsig`` when the parent dies;
    keep CAP_SYS_ADMIN across exec when asked (as an ambient capability)."""
    _check(_lib.ipufs_child_setup(deathsig, int(keep_sys_admin)), "prctl")


def become_subreaper() -> None:
    """PR_SET_CHILD_SUBREAPER: orphaned descendants become our children."""
    _check(_lib.ipufs_become_subreaper(), "prctl")


#: the shortest slice the kernel keeps (thread_slice)
SHORTEST_SLICE_S = 100e-6


def thread_slice(seconds: float) -> float:
    """Give the calling thread a fair-scheduler slice of ``seconds``
    (sched_setattr; Linux 6.12 and later keep one per thread, from 0.1 to
    100 ms): woken, a thread preempts a running one whose slice is longer
    at once, and waits for the end of a shorter one. A hint: returns the
    slice the kernel keeps, 0.0 where it keeps none per thread or refuses
    (each thread keeps the kernel's default then)."""
    kept: int = _lib.ipufs_thread_slice(round(seconds * 1e9))
    return max(0, kept) / 1e9


def vm_read(pid: int, address: int, length: int) -> bytes:
    """Read `length` bytes at `address` in process `pid` (process_vm_readv)."""
    buf = _ffi.new("char[]", length)
    n = _check(_lib.ipufs_vm_read(pid, address, buf, length), "process_vm_readv")
    return bytes(_ffi.buffer(buf, n))


def vm_write(pid: int, address: int, data: bytes) -> int:
    """Write `data` at `address` in process `pid` (process_vm_writev)."""
    return _check(_lib.ipufs_vm_write(pid, address, data, len(data)), "process_vm_writev")


class Awake:
    """A word the FUSE reader sets while it is awake (spinning, or acting on
    what its spin found) and clears before it sleeps in a blocking read.
    While it is set the reader scans the register watches itself, and the
    watcher thread sleeps on the word instead of polling (docs/registers.md)."""

    def __init__(self) -> None:
        self._word = _ffi.new("uint32_t *")

    def __bool__(self) -> bool:
        return bool(self._word[0])

    def clear(self) -> None:
        """The reader sleeps (or stops): wake the watcher thread to poll."""
        _lib.ipufs_asleep(self._word)


#: One watched IPU: words, index, expect, bell_words, bell[, span, span_expect].
WatchEntry = tuple[object, object, object, object, int] | tuple[object, object, object, object, int, object, object]


class Watch:
    """The register watcher's detector: for each watched IPU, config space
    ``words`` whose entries at ``index`` must equal ``expect``, word
    ``bell`` of ``bell_words`` that must stay 0 and, optionally, a ``span``
    of words that must equal ``span_expect`` (the whole span on the
    watcher's polls, a part per try in a SpinReader). Each argument is a
    buffer of uint32 (a numpy array, without numpy imported here); they
    must stay alive and in place while the Watch is used. One thread may
    wait() while another spins a SpinReader over the same Watch."""

    def __init__(self, entries: list[WatchEntry]) -> None:
        self._watches = _ffi.new("struct ipufs_watch[]", max(len(entries), 1))
        self._views: list[object] = []  # the buffers' cdata, alive as long as the watch
        for slot, (words, index, expect, bell_words, bell, *span) in zip(self._watches, entries, strict=False):
            views = [_ffi.from_buffer("uint32_t[]", b) for b in (words, index, expect, bell_words)]
            self._views += views
            slot.words, slot.index, slot.expect = views[0], views[1], views[2]
            slot.count = len(views[1])
            slot.bell = views[3] + bell
            if span and len(memoryview(span[0])):  # type: ignore[arg-type]
                spans = [_ffi.from_buffer("uint32_t[]", b) for b in span]
                if len(spans[0]) != len(spans[1]):
                    raise ValueError("a watched span and its expected words differ in length")
                self._views += spans
                slot.span, slot.span_expect, slot.span_count = spans[0], spans[1], len(spans[0])
        self._ready = _ffi.new("unsigned char[]", max(len(entries), 1))  # wait()'s
        self._spun = _ffi.new("unsigned char[]", max(len(entries), 1))  # a SpinReader's
        self.count = len(entries)

    def wait(self, period: float, timeout: float, awake: Awake) -> list[int]:
        """Poll every ``period`` seconds, without the GIL, until some watch
        differs (returns their positions) or ``timeout`` passes (returns []).
        While ``awake`` is set, sleep on it instead of polling."""
        if not self.count:
            return []
        found = _lib.ipufs_watch(self._watches, self.count, self._ready, int(period * 1e9), int(timeout * 1e9),
                                 awake._word)
        return [w for w in range(self.count) if self._ready[w]] if found else []


class SpinReader:
    """Reads into ``buffer`` from non-blocking ``fd``, trying for up to a
    given time without holding the GIL (the FUSE reader's spin), with
    ``awake`` set meanwhile. Between tries it may scan a Watch; what that
    scan found is kept in ``found``, apart from what was read. It runs once
    per request, so read() does as little as it can around the native
    call."""

    def __init__(self, fd: int, buffer: bytearray, awake: Awake, fast: FastPath | None = None) -> None:
        self.fd = fd
        self.awake = awake
        self._fast = fast.pointer if fast is not None else _NULL
        #: After a read() that returned None: the positions of the watch
        #: that differed between two tries (``awake`` stays set), or []
        #: when nothing came within the time (``awake`` is cleared).
        self.found: list[int] = []
        self._word = awake._word
        self._buffer = _ffi.from_buffer(buffer)
        self._length = len(buffer)

    def read(self, seconds: float, watch: Watch | None = None) -> int | None:
        """The length read, or None when no request came: ``found`` then
        says whether part of ``watch`` differs. Other failures raise
        OSError."""
        if watch is None:
            n = _spin_read(self.fd, self._buffer, self._length, int(seconds * 1e9), _NULL, 0, _NULL,
                           self._word, self._fast)
        else:
            n = _spin_read(self.fd, self._buffer, self._length, int(seconds * 1e9), watch._watches, watch.count,
                           watch._spun, self._word, self._fast)
        if n >= 0:
            return int(n)
        if n == _SPIN_WATCHED:
            assert watch is not None
            self.found = [w for w in range(watch.count) if watch._spun[w]]
            return None
        if n == _EAGAIN:
            self.found = []
            return None
        raise OSError(-n, os.strerror(-n))

    def sleep(self, fd: int) -> int | None:
        """A blocking read of ``fd`` into the buffer, without the GIL: the
        length read, or None when the fast path answered what came (the
        caller then spins again). Failures raise OSError."""
        n = _sleep_read(fd, self._buffer, self._length, self._fast)
        if n >= 0:
            return int(n)
        if n == _FAST_ANSWERED:
            return None
        raise OSError(-n, os.strerror(-n))


class FastAnswer(enum.IntEnum):
    """How the fast path answers an ioctl (enum ipufs_fast_kind): the
    ``fast`` column of the driver's ioctl table."""

    NONE = int(_lib.IPUFS_FAST_NONE)  # always by Python
    #: MAILBOX_READ_ONLY: the u64 count, the next response, or EAGAIN.
    MAILBOX_READ = int(_lib.IPUFS_FAST_MAILBOX_READ)
    #: MAILBOX_GET_OFFSETS: the rings' offsets and slots.
    MAILBOX_OFFSETS = int(_lib.IPUFS_FAST_MAILBOX_OFFSETS)


class FastPath:
    """The native fast path's state (native/src/fastpath.h) for ``ipus``
    IPUs: what its answers need, published here, and what it did. It
    starts held (answering nothing). Its ``pointer`` is what transports
    hand to the native readers. Publishing calls are made by one thread at
    a time (the daemon's lock); the buffers given must stay alive and in
    place while published."""

    def __init__(self, ipus: int) -> None:
        pointer = _lib.ipufs_fast_new(ipus)
        if pointer == _NULL:
            raise MemoryError("no memory for the fast path")
        self.pointer = _ffi.gc(pointer, _lib.ipufs_fast_free)
        self.ipus = ipus
        self._kept: dict[int, tuple[object, object]] = {}  # ipu -> its mailbox buffers' cdata

    def hold(self, hold: int) -> None:
        """Nonzero: every request goes to Python."""
        _lib.ipufs_fast_hold(self.pointer, hold)

    def ioctl_type(self, type_: int) -> None:
        _lib.ipufs_fast_ioctl_type(self.pointer, type_)

    def ioctl(self, nr: int, kind: FastAnswer, needs_write: bool) -> None:
        _lib.ipufs_fast_ioctl(self.pointer, nr, int(kind), int(needs_write))

    def rings(self, request_ring: int, request_slots: int, response_ring: int, response_slots: int,
              slot_size: int, head_word: int, status_word: int, status_responses: int) -> None:
        _lib.ipufs_fast_rings(self.pointer, request_ring, request_slots, response_ring, response_slots, slot_size,
                              head_word, status_word, status_responses)

    def mailbox(self, ipu: int, words: object | None, sequence: object | None) -> None:
        """IPU ``ipu``'s mailbox words and the ICU's change sequence (writable
        uint32 buffers, such as numpy arrays), or None to withdraw them."""
        if words is None or sequence is None:
            _lib.ipufs_fast_mailbox(self.pointer, ipu, _NULL, 0, _NULL)
            self._kept.pop(ipu, None)
            return
        views = (_ffi.from_buffer("uint32_t[]", words), _ffi.from_buffer("uint32_t[]", sequence))
        _lib.ipufs_fast_mailbox(self.pointer, ipu, views[0], len(views[0]), views[1])
        self._kept[ipu] = views

    @staticmethod
    def claimer(sequence: object) -> tuple[Callable[[], None], Callable[[], None]]:
        """Functions that claim and release change sequence ``sequence`` (a
        uint32 buffer) atomically, as the fast path does before it pops a
        response; they keep the buffer alive."""
        word = _ffi.from_buffer("uint32_t[]", sequence)
        claim, release = _lib.ipufs_fast_claim, _lib.ipufs_fast_release
        return (lambda: claim(word)), (lambda: release(word))

    def opened(self, fh: int, ipu: int, writable: bool) -> bool:
        """Whether the fast path now knows file ``fh`` (False: its slot is
        another open file's)."""
        return bool(_lib.ipufs_fast_opened(self.pointer, fh, ipu, int(writable)))

    def released(self, fh: int) -> None:
        _lib.ipufs_fast_released(self.pointer, fh)

    @property
    def answered(self) -> int:
        """Requests answered natively since the start."""
        return int(_lib.ipufs_fast_answered(self.pointer))

    def last(self, ipu: int) -> float:
        """time.monotonic() of the last request answered natively for IPU
        ``ipu`` (-inf: none)."""
        ns = int(_lib.ipufs_fast_last_ns(self.pointer, ipu))
        return ns / 1e9 if ns else float("-inf")

    def answer(self, request: bytes | bytearray | memoryview, capacity: int = 4096) -> bytes | None:
        """The reply the fast path gives ``request`` (a whole FUSE message),
        or None when it hands it to Python (tests compare the two paths)."""
        reply = _ffi.new("char[]", capacity)
        source = _ffi.from_buffer(request)
        n = _lib.ipufs_fast_answer(self.pointer, source, len(request), reply, capacity)
        return bytes(_ffi.buffer(reply, n)) if n > 0 else None


_spin_read = _lib.ipufs_spin_read
_NULL = _ffi.NULL
_sleep_read = _lib.ipufs_sleep_read
_SPIN_WATCHED = _lib.IPUFS_SPIN_WATCHED
_FAST_ANSWERED = _lib.IPUFS_FAST_ANSWERED
_EAGAIN = -errno.EAGAIN


class Rings:
    """FUSE over io_uring (native/src/uring.c) for the connection of
    /dev/fuse description ``fd`` (non-blocking): ``queues`` rings of
    ``depth`` entries with ``payload``-byte buffers, each served by a
    native thread pinned to its CPU once started. ``receive`` waits,
    without the GIL, for the next request the rings hand over or, else,
    one read from ``fd``; ``reply`` commits to a ring entry from any
    thread. The ring threads answer what ``fast`` answers themselves."""

    #: Tags at or above this name a ring entry; below, a /dev/fuse fd.
    TAG = int(_lib.IPUFS_URING_TAG)

    def __init__(self, fd: int, buffer: bytearray, *, queues: int, depth: int, fast: FastPath | None = None) -> None:
        error = _ffi.new("int *")
        self._fast = fast  # alive as long as the rings
        rings = _lib.ipufs_uring_new(fd, queues, depth, len(buffer), fast.pointer if fast is not None else _NULL,
                                     error)
        if rings == _ffi.NULL:
            raise OSError(-error[0], f"FUSE over io_uring: {os.strerror(-error[0])}")
        self._rings = rings
        self._buffer = _ffi.from_buffer(buffer)
        self._length = len(buffer)
        self._tag = _ffi.new("uint64_t *")

    def start(self, spin_ns: int) -> None:
        """Start the ring threads; each registers its entries, and waits
        awake for up to ``spin_ns`` for the replies to what it handed over.
        OSError when io_uring or the kernel refuses (the threads are stopped
        then)."""
        _check(_lib.ipufs_uring_start(self._rings, spin_ns), "FUSE over io_uring")

    def receive(self, spin_ns: int, awake: Awake, watch: Watch | None = None) -> tuple[int, int] | list[int]:
        """The next request's length in the buffer and its tag, with
        ``awake`` set while it spins (as a SpinReader's), scanning
        ``watch`` meanwhile: the positions of the watch that differ when
        that ended the wait (``awake`` stays set). OSError (ENODEV once the
        connection has ended)."""
        if self._rings == _NULL:  # closed
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))
        if watch is None:
            n = _uring_receive(self._rings, self._buffer, self._length, spin_ns, self._tag, _NULL, 0, _NULL,
                               awake._word)
        else:
            n = _uring_receive(self._rings, self._buffer, self._length, spin_ns, self._tag, watch._watches,
                               watch.count, watch._spun, awake._word)
        if n == _URING_WATCHED:
            assert watch is not None
            return [w for w in range(watch.count) if watch._spun[w]]
        if n < 0:
            raise OSError(-n, os.strerror(-n))
        return n, int(self._tag[0])

    def reply(self, message: bytes, tag: int) -> bool:
        """Commit ``message`` to the entry of ``tag``; False when the rings
        are stopped (or closed)."""
        if self._rings == _NULL:
            return False
        return _check(_lib.ipufs_uring_reply(self._rings, tag, message, len(message)), "FUSE over io_uring") > 0

    def counts(self) -> tuple[int, int]:
        """Requests answered by the ring threads, and handed over."""
        if self._rings == _NULL:
            return 0, 0
        return int(_lib.ipufs_uring_answered(self._rings)), int(_lib.ipufs_uring_handed(self._rings))

    def close(self) -> None:
        """Stop the threads and free the rings (idempotent); call it when
        nothing receives or replies any more."""
        rings, self._rings = self._rings, _NULL
        if rings != _NULL:
            _lib.ipufs_uring_free(rings)


_uring_receive = _lib.ipufs_uring_watch_receive
_URING_WATCHED = _lib.IPUFS_URING_WATCHED
