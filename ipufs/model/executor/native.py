# The native loop's Python side (native/src/executor.c, in ipufs._native):
# the layout of the arrays that hold the tiles' execution state (shared in
# place by the Python path, state.py, and the C loop), the forms a semantic
# rule's `native` column may name (the C loop's own list, read from it),
# and Loop, which runs passes over an IPU's tiles in C, handing the turns
# it does not take back to the Python path. On/off: IPUFS_NATIVE_EXECUTOR=0
# in the environment, or Execution.native. docs/execution.md, "The native loop".
from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ipufs import _native  # type: ignore[attr-defined]
from ipufs.model.executor.native_exchange import NativeExchange, Stores, Timing
from ipufs.model.memory import BarMemory
from ipufs.model.sync import HOST_ZONES, Zone

_lib: Any = _native.lib
_ffi: Any = _native.ffi

#: each context's fields and each tile's counters (int64), as executor.h lays them out
PC, STATUS, WAIT, DELAY, REPEAT = _lib.IPUFS_X_PC, _lib.IPUFS_X_STATUS, _lib.IPUFS_X_WAIT, _lib.IPUFS_X_DELAY, \
    _lib.IPUFS_X_REPEAT
BREAK = _lib.IPUFS_X_BREAK  # a breakpoint applies to the context: the C loop hands its turns to Python
WAIT_ZONE = _lib.IPUFS_X_WAIT_ZONE  # the zone of the external sync the context waits at
REPEAT_FIRST, REPEAT_END, REPEAT_LEFT, EXIT = _lib.IPUFS_X_REPEAT_FIRST, _lib.IPUFS_X_REPEAT_END, \
    _lib.IPUFS_X_REPEAT_LEFT, _lib.IPUFS_X_EXIT
CONTEXT_FIELDS = _lib.IPUFS_X_CONTEXT_FIELDS
TURN, TURNS, INSTRUCTIONS, LINK, COUNT_OFFSET, TILE_FIELDS = _lib.IPUFS_X_TURN, _lib.IPUFS_X_TURNS, \
    _lib.IPUFS_X_INSTRUCTIONS, _lib.IPUFS_X_LINK, _lib.IPUFS_X_COUNT_OFFSET, _lib.IPUFS_X_TILE_FIELDS
EVENTS = _lib.IPUFS_X_EVENTS  # the supervisor's exchange events since its last sync
REGISTERS = _lib.IPUFS_X_REGISTERS  # $m0..$m15, then $a0..$a15
#: each context's CSRs (u32): lower space index i at i, upper space index j at UPPER + j
CSRS, UPPER = _lib.IPUFS_X_CSRS, _lib.IPUFS_X_UPPER
#: the accesses of the CSR table (Loop's csr_ops): get, put, uget, uput
GET, PUT, UGET, UPUT, ACCESSES = _lib.IPUFS_X_GET, _lib.IPUFS_X_PUT, _lib.IPUFS_X_UGET, _lib.IPUFS_X_UPUT, \
    _lib.IPUFS_X_ACCESSES
#: the program events the loop logs
EVENT_SYNC, EVENT_START, EVENT_EXIT = _lib.IPUFS_X_EVENT_SYNC, _lib.IPUFS_X_EVENT_START, _lib.IPUFS_X_EVENT_EXIT
WAIT_NONE, WAIT_WORKERS, WAIT_INTERNAL, WAIT_EXTERNAL = _lib.IPUFS_X_WAIT_NONE, _lib.IPUFS_X_WAIT_WORKERS, \
    _lib.IPUFS_X_WAIT_INTERNAL, _lib.IPUFS_X_WAIT_EXTERNAL
WAIT_EXCHANGE, WAIT_ANS = _lib.IPUFS_X_WAIT_EXCHANGE, _lib.IPUFS_X_WAIT_ANS
#: what Loop.scan counts
RUNNABLE, MEMBERS, INTERNAL, EXTERNAL = _lib.IPUFS_X_RUNNABLE, _lib.IPUFS_X_MEMBERS, _lib.IPUFS_X_INTERNAL, \
    _lib.IPUFS_X_EXTERNAL
SUPERVISOR_BIT, WORKER_BIT, BODY_BIT = _lib.IPUFS_X_SUPERVISOR, _lib.IPUFS_X_WORKER, _lib.IPUFS_X_BODY
#: turns between the loop's looks at its stop flag; what a visit to a tile counts as
CHECK_TURNS, TILE_TURNS = _lib.IPUFS_X_CHECK_TURNS, _lib.IPUFS_X_TILE_TURNS


FORMS: dict[str, int] = {_ffi.string(_lib.ipufs_x_form_name(i)).decode(): i for i in range(_lib.ipufs_x_form_count())}
KINDS: dict[str, int] = {_ffi.string(_lib.ipufs_x_kind_name(i)).decode(): i for i in range(_lib.ipufs_x_kind_count())}
#: what get/put/uget/uput of a CSR may do in the C loop ("python": hand the turn back)
CSR_OPS: dict[str, int] = {_ffi.string(_lib.ipufs_x_csr_op_name(i)).decode(): i
                           for i in range(_lib.ipufs_x_csr_op_count())}
PYTHON_FORM = FORMS["python"]
#: the environment variable that turns the native loop off ("0")
SWITCH = "IPUFS_NATIVE_EXECUTOR"
#: the environment variable that sets how many threads a pass may use (default: the CPUs this process may use)
THREADS = "IPUFS_EXECUTOR_THREADS"
_DIRTY_PAIRS = 16384
_EVENTS = 4096
#: the decode cache's entries at most, per IPU (56 bytes each, in a table kept at most half full: 7 MiB)
CACHE_ENTRIES = 1 << 16
#: turns a run still takes once it sees its stop flag set (Execution.stop_when)
GRACE_TURNS = 1024
#: a pass that gives its tiles at least this many turns in all spreads them over the threads
PARALLEL_TURNS = 1 << 16
#: turns between the loop's offers of its CPU (sched_yield) while it runs with a lock lent on one CPU,
#: which a FUSE reader needs too (_call)
YIELD_TURNS = _lib.IPUFS_X_YIELD_TURNS
#: the fair-scheduler slice of the threads that run tiles (the pool's, and the daemon's executor task's:
#: ipufs.native.thread_slice): longer than any other thread's, so that a thread that wakes (a FUSE reader,
#: the register watcher, a client) takes a CPU from the tiles at once, and they never offer theirs
LANE_SLICE_S = 0.02


def enabled() -> bool:
    """The process's default: on unless IPUFS_NATIVE_EXECUTOR=0."""
    return os.environ.get(SWITCH, "1") != "0"


def threads() -> int:
    """The threads a pass may spread its tiles over: IPUFS_EXECUTOR_THREADS,
    else the CPUs this process may run on (at least 1)."""
    wanted = os.environ.get(THREADS, "")
    most: int = _lib.IPUFS_X_MAX_LANES
    if wanted.isdigit() and int(wanted) > 0:
        return min(int(wanted), most)
    return max(1, min(len(os.sched_getaffinity(0)), most))


def code(native: str) -> tuple[int, int]:
    """A rule's native name (``FORM`` or ``FORM.KIND``) as the C loop's
    form and kind numbers; ValueError naming what it lacks."""
    form, _, kind = native.partition(".")
    if form not in FORMS or form == "python" or kind not in KINDS:
        raise ValueError(f"native form {native!r}: the C loop has no such form or kind")
    return FORMS[form], KINDS[kind]


class Arrays:
    """The execution state of every tile of one IPU, as arrays: registers
    [tile, context, 32] and CSRs [tile, context, CSRS] (u32), fields
    [tile, context, CONTEXT_FIELDS] and counters [tile, TILE_FIELDS] (i64).
    Each lies in an anonymous mapping of its own: an IPU whose tiles never
    ran costs no memory, however much the allocator holds (calloc would
    clear reused memory, and touch every page of it)."""

    def __init__(self, tiles: int, contexts: int) -> None:
        self.registers: NDArray[np.uint32] = _zeros((tiles, contexts, REGISTERS), np.uint32)
        self.csrs: NDArray[np.uint32] = _zeros((tiles, contexts, CSRS), np.uint32)
        self.fields: NDArray[np.int64] = _zeros((tiles, contexts, CONTEXT_FIELDS), np.int64)
        self.counters: NDArray[np.int64] = _zeros((tiles, TILE_FIELDS), np.int64)


def _zeros(shape: tuple[int, ...], dtype: type[Any]) -> Any:
    """A zeroed array in pages of its own, mapped only once written."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, max(size, 1)), dtype, int(np.prod(shape))).reshape(shape)


class RunningTiles(set[int]):
    """The running tiles of an IPU: a set, which also gives its members as
    a sorted array (order()), made again only after a change."""

    def __init__(self) -> None:
        super().__init__()
        self._order: NDArray[np.uint32] | None = None

    def order(self) -> NDArray[np.uint32]:
        if self._order is None:
            self._order = np.array(sorted(self), np.uint32)
        return self._order


def _changes(name: str) -> Callable[..., Any]:
    method = getattr(set, name)

    def changed(self: RunningTiles, *args: Any) -> Any:
        self._order = None
        return method(self, *args)
    return changed


for _name in ("add", "discard", "remove", "pop", "clear", "update", "difference_update", "intersection_update",
              "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__"):
    setattr(RunningTiles, _name, _changes(_name))


#: what the loop asks of Python: decode a word (or a bundle's two) into who
#: may run it and each half's (form, kind, operands); take one turn of a
#: tile on the Python path
Decode = Callable[[int], tuple[int, list[tuple[int, int, tuple[int, ...]]]]]
Turn = Callable[[int], None]
#: Execution._settle after a pass: (a context was released, the running tiles changed)
Settle = Callable[[], tuple[bool, bool]]
#: a program event the loop logged, for the trace: kind (EVENT_*), tile, context, PC, value
Logged = Callable[[int, int, int, int, int], None]


#: a run's lent lock (Loop.run): the Lender, whether the run may go on, whether the model was reset since it began
Lent = tuple["Lender", Callable[[], bool], Callable[[], bool]]


class Lender(Protocol):
    """The daemon's lock, let go while the C loop runs (Execution.lend_lock):
    a thread that takes it meanwhile holds the loop first (Loop.hold), and
    lets it go on, or end when ``go_on`` says no, as it lets the lock go
    (Loop.resume)."""

    def lend(self, loop: Loop, go_on: Callable[[], bool]) -> bool:
        """Let the lock go (false: it cannot be, held more than once)."""

    def reclaim(self) -> None:
        """Take it back."""


class Loop:
    """The C loop over the tiles of one IPU: its state arrays, tile memory
    and decode cache; and the exchange between its tiles (xx), which both
    paths run in C."""

    def __init__(self, arrays: Arrays, exchange: BarMemory, base: int, window: int, sram: int, memory_base: int,
                 csr_ops: NDArray[np.uint8], *, region1: int | None = None, bounded: bool = False,
                 lanes: int | None = None, cache_entries: int = CACHE_ENTRIES, fabric: Timing | None = None,
                 stored: Stores | None = None) -> None:
        """``csr_ops`` [2, ACCESSES, 256]: for the supervisor, then a
        worker, what each access of each CSR index does (CSR_OPS).
        ``region1``: the SRAM offset where region 1 starts (None: half way);
        ``bounded``: only [memory_base, + sram) is memory, else addresses
        alias onto it (tiles.py); ``lanes``: the threads a pass may use
        (None: threads()); ``cache_entries``: the decode cache's bound;
        ``fabric``: the timing of the exchange between the tiles (None: not
        public, the exchange instructions fault); ``stored``: told of the
        stores the exchange makes, when it wants them."""
        if window & (window - 1) or window > 1 << 21 or window >= 2 * sram or exchange.size >= 1 << 32:
            raise ValueError("the native loop needs a power-of-two tile window below 2 MiB and twice the SRAM")
        if csr_ops.shape != (2, ACCESSES, 256) or csr_ops.dtype != np.uint8:
            raise ValueError("the CSR table must be uint8 [2, ACCESSES, 256]")
        if (csr_ops >= len(CSR_OPS)).any() or (csr_ops[:, (UGET, UPUT), CSRS - UPPER:] != CSR_OPS["python"]).any():
            # the C loop indexes a context's CSR row by the table: an upper index past the row is Python's
            raise ValueError(f"the CSR table names an unknown access, or an upper index from 0x{CSRS - UPPER:x}")
        self.exchange = exchange
        self.base = base  # where tile 0's window starts in the exchange BAR
        self._csr_ops = np.ascontiguousarray(csr_ops)
        self._keep = [_ffi.from_buffer(a, require_writable=True)
                      for a in (arrays.registers, arrays.csrs, arrays.fields, arrays.counters, exchange.bytes)]
        self._dirty: NDArray[np.uint32] = np.zeros(2 * _DIRTY_PAIRS, np.uint32)
        self._events: NDArray[np.uint32] = np.zeros(5 * _EVENTS, np.uint32)
        self._keep += [_ffi.from_buffer(a, require_writable=True) for a in (self._dirty, self._events)]
        self._keep.append(_ffi.from_buffer(self._csr_ops))
        self._cache = _ffi.gc(_lib.ipufs_x_cache_new(cache_entries), _lib.ipufs_x_cache_free)
        if self._cache == _ffi.NULL:
            raise MemoryError("the native loop's decode cache")
        #: the CPUs this process may use when the loop was made
        self.cpus = len(os.sched_getaffinity(0))
        lanes = threads() if lanes is None else lanes
        region1 = sram // 2 if region1 is None else region1
        if lanes > 1:
            # once per process; a pool that cannot start leaves one thread
            _lib.ipufs_x_pool_start(lanes, round(LANE_SLICE_S * 1e9))
        self._lanes = _ffi.gc(_lib.ipufs_x_lanes_new(arrays.registers.shape[0], region1, lanes, _EVENTS,
                                                      _DIRTY_PAIRS), _lib.ipufs_x_lanes_free)
        if self._lanes == _ffi.NULL:
            raise MemoryError("the native loop's lanes")
        x = self._x = _ffi.new("struct ipufs_x *")
        x.registers, x.csrs, x.contexts, x.tiles, x.memory, x.dirty, x.events, x.csr_ops = (
            _ffi.cast(t, b) for t, b in zip(("uint32_t *", "uint32_t *", "int64_t *", "int64_t *", "uint8_t *",
                                              "uint32_t *", "uint32_t *", "uint8_t *"), self._keep))
        x.memory += base
        x.window, x.sram, x.count, x.memory_base = window, sram, arrays.registers.shape[1], memory_base
        x.region1, x.bounded = region1, int(bounded)
        x.zone_local, x.zone_internal, x.event_capacity = Zone.LOCAL, Zone.INTERNAL, _EVENTS
        x.zones_external = sum(1 << zone for zone in HOST_ZONES)
        x.cache, x.lanes = self._cache, self._lanes
        x.grace, x.parallel = GRACE_TURNS, PARALLEL_TURNS
        #: the exchange between the tiles (native_exchange.py), run in C on both paths
        self.xx = NativeExchange(x, arrays.registers.shape[0], fabric, memory_base, sram, stored)
        self._pass = _ffi.new("struct ipufs_x_pass *")
        self._runnable: NDArray[np.uint32] = np.zeros(arrays.registers.shape[0], np.uint32)
        self.retired = 0  # instructions the C loop retired, ever

    @property
    def parallel_turns(self) -> int:
        """A pass that gives its tiles at least this many turns in all
        spreads them over the threads (0: never)."""
        return int(self._x.parallel)

    @parallel_turns.setter
    def parallel_turns(self, turns: int) -> None:
        self._x.parallel = turns

    @property
    def spread(self) -> int:
        """The passes that spread their tiles over the threads, ever."""
        return int(self._x.spread)

    def forget(self) -> None:
        """Drop every decoded word and code slot (a reset: the memory goes back)."""
        if _lib.ipufs_x_cache_clear(self._cache) < 0:
            raise MemoryError("the native loop's decode cache")
        _lib.ipufs_x_lanes_clear(self._lanes)

    def cached(self) -> tuple[int, int]:
        """The decode cache's entries, and the bytes it and the code slots take."""
        size = _ffi.new("int64_t *")
        entries = _lib.ipufs_x_cache_size(self._cache, size)
        return int(entries), int(size[0]) + int(_lib.ipufs_x_lanes_bytes(self._lanes))

    def runnable(self, order: NDArray[np.uint32]) -> NDArray[np.uint32]:
        """Of the running tiles ``order`` (sorted), those that would take a
        turn now: a pass's tiles, on either path."""
        n = _lib.ipufs_x_runnable(self._x, _ffi.from_buffer("uint32_t[]", order), len(order),
                                  _ffi.from_buffer("uint32_t[]", self._runnable, require_writable=True))
        return self._runnable[:n].copy()

    def stop_when(self, flag: bytearray | None, grace: int = GRACE_TURNS) -> None:
        """End each run() ``grace`` turns after it sees ``flag[0]`` nonzero
        (within IPUFS_X_CHECK_TURNS more, or at the end of the tile in
        hand); None: never. The daemon's FUSE reader sets it while a
        request waits for the lock."""
        # The buffer held as long as the loop reads it (which also keeps
        # the bytearray from being resized under the pointer).
        self._stop = _ffi.from_buffer("uint8_t[]", flag) if flag is not None else _ffi.NULL
        self._x.stop = self._stop
        self._x.grace = grace

    def learn(self, key: int, who: int, halves: list[tuple[int, int, tuple[int, ...]]]) -> None:
        """What the C loop does with ``key`` (a word, or a bundle's two):
        for each half its form, kind and operands; who may run it."""
        forms = [n for form, kind, _ in halves for n in (form, kind)] + [0, 0]
        operands = [v & 0xFFFFFFFF for _, _, o in halves for v in (*o, 0, 0, 0, 0)[:4]] + [0] * 4
        if _lib.ipufs_x_learn(self._cache, key, who, _ffi.new("int32_t[]", forms[:4]),
                              _ffi.new("uint32_t[]", operands[:8])) < 0:
            raise MemoryError("the native loop's decode cache")

    def run(self, order: NDArray[np.uint32], slice_turns: int, budget: int, cursor: int, decode: Decode,
            turn: Turn, settle: Settle, logged: Logged, lent: Lent | None = None) -> tuple[int, int, int, bool]:
        """Execution.run's passes over the running tiles ``order`` (sorted),
        from ``cursor``, until ``budget`` turns are taken or a pass takes
        none and releases nothing. ``settle``, called after the first pass
        and after each in which Python took a turn, says whether it
        released a context and whether the running tiles changed (then
        this returns, to be called again with them). With ``lent`` (a
        Lender, whether the run may go on, whether the model was reset
        since it began) the caller's lock is let go while the C loop runs.
        Returns the turns taken, the cursor after them, the instructions
        the C loop retired and whether to go on with the running tiles as
        they are now."""
        x, p = self._x, self._pass
        x.dirty_capacity = _DIRTY_PAIRS if self.exchange.track_dirty else 0
        self.xx.logging()
        x.retired = 0
        p.done, p.last, p.cursor, p.underway, p.settle, p.handed, p.stopped = 0, 0, cursor, 0, 1, 0, 0
        p.fresh = 1
        n = len(order)
        at = _ffi.from_buffer("uint32_t[]", order)
        while True:
            rc = self._call(at, n, slice_turns, budget, lent)
            if lent is not None and lent[2]():  # reset meanwhile: what it did is gone
                x.dirty_count = x.event_count = 0
                return 0, cursor, 0, False
            if x.dirty_count:
                self._drain()
            self.xx.drain_stores()
            if x.event_count:
                log = self._events[:5 * x.event_count].tolist()
                x.event_count = 0
                for i in range(0, len(log), 5):
                    logged(*log[i:i + 5])
            if rc == _lib.IPUFS_X_ABORT or lent is not None and not lent[1]():  # the model changed under it
                self.retired += x.retired
                return p.done, p.cursor, x.retired, False
            if rc == _lib.IPUFS_X_MISS:
                self.learn(x.miss, *decode(x.miss))
            elif rc == _lib.IPUFS_X_PYTHON:
                turn(p.tile)
                p.partial += 1
                p.handed += 1
            elif rc == _lib.IPUFS_X_DONE:
                released, changed = False, False
                if p.settle or p.handed:
                    released, changed = settle()
                    p.settle, p.handed = 0, 0
                more = p.done < budget and bool(p.last or released) and not p.stopped
                if not more or changed:
                    self.retired += x.retired
                    return p.done, p.cursor, x.retired, more

    def _call(self, at: Any, n: int, slice_turns: int, budget: int, lent: Lent | None) -> int:
        """ipufs_x_run, with the caller's lock let go meanwhile if ``lent``."""
        x = self._x
        x.hold = 0  # an end a hold asked for is over: nobody holds the loop while the caller has the lock
        if lent is None or not lent[0].lend(self, lent[1]):
            x.offer = 0
            return int(_lib.ipufs_x_run(x, at, n, slice_turns, budget, self._pass))
        # With more than one CPU the threads spin at holds, and a thread that
        # wakes takes a CPU from them (LANE_SLICE_S): an offer would only hand
        # theirs to another process. With one, the FUSE reader gets the CPU
        # soonest when the loop offers it, and nobody spins
        x.offer, x.spin = (0, _lib.IPUFS_X_HOLD_SPINS) if self.cpus > 1 else (YIELD_TURNS, 0)
        try:
            return int(_lib.ipufs_x_run(x, at, n, slice_turns, budget, self._pass))
        finally:
            lent[0].reclaim()

    def hold(self, after: float = 0.0) -> None:
        """Another thread took the lock lent to a run: ``after`` seconds
        from now every thread of the loop stops at its next look and waits
        (Lender)."""
        _lib.ipufs_x_hold(self._x, int(after * 1e9))

    def resume(self, end: bool) -> None:
        """The hold ends: the run goes on, or ends (``end``)."""
        _lib.ipufs_x_resume(self._x, int(end))

    def scan(self, order: NDArray[np.uint32]) -> tuple[list[int], list[int]]:
        """Of the running tiles ``order``: those with no active context
        left, and the counts (RUNNABLE, MEMBERS, INTERNAL, EXTERNAL) that
        Execution._settle and busy() read."""
        stopped = np.zeros(len(order), np.uint32)
        counts = _ffi.new("int64_t[]", _lib.IPUFS_X_COUNTS)
        gone = _lib.ipufs_x_scan(self._x, _ffi.from_buffer("uint32_t[]", order), len(order),
                                 _ffi.from_buffer("uint32_t[]", stopped, require_writable=True), counts)
        return stopped[:gone].tolist(), list(counts)

    def _drain(self) -> None:
        pairs = self._dirty[:2 * self._x.dirty_count].tolist()
        self._x.dirty_count = 0
        for i in range(0, len(pairs), 2):
            self.exchange.written(self.base + pairs[i], pairs[i + 1])
