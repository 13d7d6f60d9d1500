# Delivering exchange words to one receiving tile: which words its
# multiplexer selected as they arrived (the sender it named at that event,
# on a direction the send set), when each is stored (arrival + the
# fabric's latency to that tile's memory), where (its $INCOMING_BASE plus
# $INCOMING_DELTA, which then steps by 4; a pointer write sets the delta
# at its own event), and the receive errors a store meets (a bad address,
# a clash with the tile's instruction fetch or with its own send's read).
# exchange.py decides when a receiver may be resolved how far; this module
# does it, for one receiver, from the senders' logs. docs/execution.md,
# "Exchange".
from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ipufs.model.fabric import Fabric
from ipufs.model.tiles import TileMemory

INCOMING_MUX, INCOMING_DELTA, INCOMING_FORMAT, INCOMING_BASE = 0xA0, 0xA2, 0xA3, 0xA4
#: the multiplexer's neutral value (TILE_MUX_EXCHANGE) and the host endpoints' base (TILE_MUX_HOST)
NEUTRAL, HOST = 0x640, 0x600
#: before every event of a phase
NEVER = -(1 << 40)
#: the receive-error codes of CTXT_STS.ERERR (TileExchangeReceiveError)
CLASH_INSTR, CLASH_IFETCH, BAD_ADDRESS, BAD_CONFIGURATION = 1, 2, 3, 6
#: the pointer (PIC selector 0) and format (selector 1) writes
POINTER, FORMAT = 0, 1
#: how far ahead of its PC the supervisor fetches (IPU21_SUPERVISOR_FETCH_LOOKAHEAD)
FETCH_AHEAD = 64


def element(address: int) -> int:
    """The memory element an address lies in: fetch, a send's read and an
    incoming store contend per element (0x4000 bytes below 0x80000, 0x8000
    in the interleaved region above: osmarks/ipu-stack memory.rs)."""
    return address >> 14 if address < 0x80000 else 0x20 + ((address - 0x80000) >> 15)


def elements(addresses: NDArray[np.int64]) -> NDArray[np.int64]:
    """element() of each address."""
    return np.where(addresses < 0x80000, addresses >> 14, 0x20 + ((addresses - 0x80000) >> 15))


@dataclass
class Sent:
    """What one tile sent this phase: runs of words, each with the event of
    its first word and the send's sctl; and what its sends read (first and
    last event, the elements read) for the clash rule."""

    runs: list[tuple[int, NDArray[np.uint32], int]] = field(default_factory=list)
    reads: list[tuple[int, int, frozenset[int]]] = field(default_factory=list)
    #: the sctl of the stream a sendoff or sendpic continues ($OUTGOING_DELTA holds where)
    sctl: int = 0


@dataclass
class Receiving:
    """One receiver's state this phase: its multiplexer's values from the
    events they were written at (the first from before the phase), the
    pointer and format writes not made yet, how far arrivals are resolved,
    and the PC of each exchange instruction it issued, by its last event."""

    muxes: list[tuple[int, int]]
    pending: deque[tuple[int, int, int]] = field(default_factory=deque)
    done: int = NEVER
    code: list[tuple[int, int]] = field(default_factory=list)

    def mux(self) -> int:
        return self.muxes[-1][1]


class ReceiveError(Exception):
    """A store the receiver cannot make: ``code`` is its ERERR."""

    def __init__(self, code: int, address: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.address = address


class Delivery:
    """Resolves receivers' arrivals against the senders' logs and stores
    the words it selected in tile memory."""

    def __init__(self, fabric: Fabric, tiles: TileMemory, csrs: NDArray[np.uint32]) -> None:
        self.fabric = fabric
        self.tiles = tiles
        self.csrs = csrs  # [tile, context, index]: the supervisor's exchange CSRs at [tile, 0]
        self.first, self.end = tiles.base, tiles.base + tiles.sram

    def source(self, value: int) -> int | None:
        """The logical tile a multiplexer value selects, or None (the
        neutral value, a host endpoint)."""
        return int(self.fabric.logical[value]) if value < len(self.fabric.logical) else None

    def resolve(self, r: int, rx: Receiving, sent: dict[int, Sent], upto: int,
                reached: Callable[[int], int | None] | None, pc: int) -> tuple[int, int] | None:
        """Store what ``r`` receives up to its event ``upto``: the arrivals
        up to ``upto`` minus its latency. ``reached(sender)``: how far a
        sender's log is complete (None: it sends no more this phase); None:
        every sender is done. Returns (sender, event) when a needed
        word's sender has not reached that event yet (what is before it is
        stored), else None. ``pc``: the receiver's PC after its last
        exchange instruction (for the fetch clash). Raises ReceiveError."""
        latency = int(self.fabric.latency[r])
        last = upto - latency  # the last arrival to resolve
        if last <= rx.done and not (rx.pending and rx.pending[0][0] <= upto):
            return None  # nothing new is due
        blocked = None
        words: list[NDArray[np.uint32]] = []
        events: list[NDArray[np.int64]] = []  # when each is stored
        muxes = rx.muxes
        start = max(0, bisect_left(muxes, (rx.done + 1, -1)) - 1)
        for i in range(start, len(muxes)):
            a0 = max(muxes[i][0], rx.done + 1)
            a1 = min(muxes[i + 1][0] if i + 1 < len(muxes) else last + 1, last + 1)  # arrivals [a0, a1)
            s = self.source(muxes[i][1])
            if a0 >= a1 or s is None:
                continue
            delay = int(self.fabric.time[s, r])
            far = None if reached is None else reached(s)
            if far is not None and far < a1 - 1 - delay:
                a1 = max(a0, far + delay + 1)
                blocked = (s, a1 - delay)
            bit = int(self.fabric.direction[s, r])
            for first, run, sctl in sent[s].runs if s in sent else ():
                lo, hi = max(first, a0 - delay), min(first + len(run), a1 - delay)
                if lo < hi and sctl & bit:
                    words.append(run[lo - first:hi - first])
                    events.append(np.arange(lo + delay + latency, hi + delay + latency, dtype=np.int64))
            if blocked is not None:
                last = a1 - 1
                break
        if words or rx.pending and rx.pending[0][0] <= last + latency:
            self._store(r, rx, words, events, last + latency, pc, sent.get(r))
        rx.done = last
        return blocked

    def _store(self, r: int, rx: Receiving, words: list[NDArray[np.uint32]], events: list[NDArray[np.int64]],
               upto: int, pc: int, own: Sent | None) -> None:
        """Make the stores (in event order) and the pointer writes due by
        ``upto``: a write before the stores of its own event."""
        csrs = self.csrs[r, 0]
        data = np.concatenate(words) if words else np.zeros(0, np.uint32)
        when = np.concatenate(events) if events else np.zeros(0, np.int64)
        i, n = 0, len(data)
        pending = rx.pending
        while i < n or (pending and pending[0][0] <= upto):
            if pending and (i == n or pending[0][0] <= when[i]):
                _, kind, value = pending.popleft()
                if kind == POINTER:
                    csrs[INCOMING_DELTA] = (value << 2) & 0xFFFFFFFF
                else:
                    csrs[INCOMING_FORMAT] = value
                continue
            j = n if not pending else i + int(np.searchsorted(when[i:], pending[0][0], "left"))
            address = (int(csrs[INCOMING_BASE]) + int(csrs[INCOMING_DELTA])) & 0xFFFFFFFF
            self._check(rx, address, when[i:j], pc, own)
            self.tiles.write_words(r, address, data[i:j])
            csrs[INCOMING_DELTA] = (int(csrs[INCOMING_DELTA]) + 4 * (j - i)) & 0xFFFFFFFF
            i = j

    def _check(self, rx: Receiving, address: int, when: NDArray[np.int64], pc: int, own: Sent | None) -> None:
        """The receive errors of storing len(when) words from ``address`` at
        the events ``when``: a bad address, then a clash with the fetch of
        the instruction running then, then with the tile's own send's read."""
        end = address + 4 * len(when)
        if address % 4 or address < self.first or end > self.end:
            raise ReceiveError(BAD_ADDRESS, address, f"exchange store of {len(when)} words at 0x{address:x}: no "
                                                     f"tile memory there (0x{self.first:x}..0x{self.end:x})")
        touched = set(range(element(address), element(end - 4) + 1))  # elements rise with the address
        code = rx.code
        fetched = {element(p + ahead) for _, p in code for ahead in (0, FETCH_AHEAD)}
        fetched |= {element(pc), element(pc + FETCH_AHEAD)}
        reads = [r for r in own.reads if r[2] & touched] if own is not None else []
        if not touched & fetched and not reads:
            return  # the common case: no element in common at any event
        stored = elements(address + 4 * np.arange(len(when), dtype=np.int64))
        lasts = np.array([e for e, _ in code] or [0], np.int64)
        pcs = np.array([p for _, p in code] + [pc], np.int64)
        fetching = pcs[np.searchsorted(lasts, when, "left") if code else np.zeros(len(when), np.int64)]
        clash = (stored == elements(fetching)) | (stored == elements(fetching + FETCH_AHEAD))
        if clash.any():
            k = int(clash.argmax())
            raise ReceiveError(CLASH_IFETCH, address + 4 * k,
                               f"exchange store at 0x{address + 4 * k:x} (event {int(when[k])}) clashes with the "
                               f"fetch of the code at 0x{int(fetching[k]):x}")
        for first, last, read in reads:
            clash = (when >= first) & (when <= last) & np.isin(stored, list(read))
            if clash.any():
                k = int(clash.argmax())
                raise ReceiveError(CLASH_INSTR, address + 4 * k,
                                   f"exchange store at 0x{address + 4 * k:x} (event {int(when[k])}) clashes with "
                                   f"this tile's send reading that element")
