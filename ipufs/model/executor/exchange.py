# The exchange between one IPU's tiles, as its scheduler runs them. Each
# tile counts exchange events from its release of the last sync (the
# EVENTS counter: only the exchange instructions advance it, delay
# included); a send logs the words it puts on the fabric at its events; a
# receiver's multiplexer and pointer writes are kept with the events they
# take effect at. A receiver is resolved lazily, before each instruction it
# issues, up to its own event count: the fabric's timing (fabric.py) says
# which sender's word reached its multiplexer at each of its events, and
# delivery.py stores it. A word one tile sends at its event e is stored at
# least 18 events later in the receiver's count (T + latency >= 18 for
# every pair of a GC200), so a receiver needs only words its senders have
# already sent, or will once they catch up: until they do, it stands still
# (Wait.EXCHANGE). A sender that waits at a sync, or stopped, has sent all
# it will this phase; when every member reaches the next sync, every
# receiver is resolved in full and the counts start again. The result does
# not depend on how the scheduler slices the tiles. docs/execution.md,
# "Exchange".
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import native
from ipufs.model.executor.delivery import (
    BAD_CONFIGURATION, FETCH_AHEAD, FORMAT, HOST, INCOMING_DELTA, INCOMING_MUX, NEUTRAL, NEVER, POINTER, Delivery,
    Receiving, ReceiveError, Sent, element,
)
from ipufs.model.executor.state import Context, Etype, Status, TileFault, TileState, Wait
from ipufs.model.fabric import Fabric
from ipufs.model.profile import Profile
from ipufs.model.tiles import TileMemory

INCOMING_MUXPAIR, INCOMING_FORMAT, INCOMING_SINIT = 0xA1, 0xA3, 0xA5
OUTGOING_BASE, OUTGOING_DELTA = 0xA7, 0xA8
#: the waits of a sender that has sent all it will this phase
_DONE = frozenset({native.WAIT_INTERNAL, native.WAIT_EXTERNAL, native.WAIT_ANS})
_ACTIVE = int(Status.ACTIVE)
#: what a fault does (Execution.fault)
Fault = Callable[[TileState, Context, TileFault], None]


def not_modelled(c: Context, what: str) -> TileFault:
    return TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc, f"{what}: not modelled by ipufs "
                     "(docs/execution.md, \"Exchange\")")


class Exchange:
    """The exchange state of one IPU's tiles (``arrays``, ``tiles``),
    whose running tiles are ``running``; ``state(tile)`` gives a tile's
    TileState, ``fault`` raises an exception on a context, ``rewatch``
    sets whether a tile's turns go to the Python path."""

    def __init__(self, profile: Profile, tiles: TileMemory, arrays: native.Arrays, running: native.RunningTiles,
                 state: Callable[[int], TileState], fault: Fault, rewatch: Callable[[TileState], None]) -> None:
        self.has_fabric = profile.tile_numbering == "c600"
        self.profile = profile.name
        self.tiles = tiles
        self.arrays = arrays
        self.running = running
        self.state = state
        self.fault = fault
        self.rewatch = rewatch
        self._delivery: Delivery | None = None
        self.sent: dict[int, Sent] = {}
        self.receiving: dict[int, Receiving] = {}
        #: receivers whose turns the Python path takes, to be resolved before each
        self.python: set[int] = set()
        #: receivers standing still: the (sender, event) each waits for,
        #: and what its supervisor waited for before (a worker may have met the wait)
        self.waiting: dict[int, tuple[int, int, Wait]] = {}

    @property
    def delivery(self) -> Delivery:
        if self._delivery is None:
            self._delivery = Delivery(Fabric.gc200(), self.tiles, self.arrays.csrs)
        return self._delivery

    def reset(self) -> None:
        self.sent.clear()
        self.receiving.clear()
        self.python.clear()
        self.waiting.clear()

    # --- what the exchange instructions do (exchange_ops.py) -------------------------
    def require(self, c: Context, mnemonic: str) -> None:
        """Fault unless this IPU's fabric timing is known."""
        if not self.has_fabric:
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc,
                            f"{mnemonic}: the exchange of {self.profile} is not public (its fabric's timing): "
                            "only the GC200's (ipu2, ipu21) is modelled")

    def advance(self, t: TileState, c: Context, n: int) -> None:
        """An exchange instruction takes n + 1 events (and as many turns)."""
        c.delay = n
        if c.number:
            return
        t.events += n + 1
        rx = self.receiving.get(t.tile)
        if rx is not None:
            rx.code.append((t.events, c.pc))

    def transmit(self, t: TileState, c: Context, item: int, count: int, sctl: int) -> None:
        """A send of ``count`` words from item address ``item`` at the events
        after the tile's count, in the directions ``sctl`` gives; the stream
        goes on from the next item."""
        if sctl & 4:
            raise not_modelled(c, "64-bit (paired) sends")
        csrs = t.supervisor.csrs
        csrs[OUTGOING_DELTA] = (item + count) & 0xFFFFFFFF
        self.sent.setdefault(t.tile, Sent()).sctl = sctl
        if not sctl & 3 or not count:
            return  # sctl 0: the events pass, nothing is sent
        address = (csrs[OUTGOING_BASE] + 4 * item) & 0xFFFFFFFF
        end = address + 4 * count
        tiles = self.tiles
        if address < tiles.base or end > tiles.base + tiles.sram:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.INVALID_ADDRESS, address,
                            f"send of {count} words from 0x{address:x}: no tile memory there")
        read = frozenset(range(element(address), element(end - 4) + 1))  # elements rise with the address
        if read & {element(c.pc), element(c.pc + FETCH_AHEAD)}:
            raise TileFault(Etype.CONFLICT, ExceptionCause.EXCHANGE, c.pc, f"send from 0x{address:x} reads the "
                            "memory element its code is fetched from")
        words = tiles.read_words(t.tile, address, count)
        sent = self.sent[t.tile]
        sent.runs.append((t.events + 1, words, sctl))
        sent.reads.append((t.events + 1, t.events + count, read))

    def stream(self, t: TileState) -> tuple[int, int]:
        """Where the current outgoing stream goes on (its next item) and its sctl."""
        sent = self.sent.get(t.tile)
        return t.supervisor.csrs[OUTGOING_DELTA], 0 if sent is None else sent.sctl

    def xpic(self, t: TileState, c: Context, paired: int, value: int, event: int) -> None:
        """An XPIC write at ``event``: the multiplexer (paired 0) or the
        paired one (1: 64-bit receives, not modelled but for a neutral value)."""
        if paired:
            if value < self.tiles.profile.tiles:
                raise not_modelled(c, "paired (64-bit) receives")
            return
        self.mux(t, c, value, event)

    def mux(self, t: TileState, c: Context, value: int, event: int) -> None:
        """``$INCOMING_MUX`` := ``value`` for the words arriving from ``event``."""
        value &= 0x1FFF
        if not (value < self.tiles.profile.tiles or HOST <= value <= NEUTRAL):
            t.receive_error = BAD_CONFIGURATION
            raise TileFault(Etype.EXCONF, ExceptionCause.EXCHANGE, c.pc, f"multiplexer value 0x{value:x} names "
                            "no tile, host endpoint or the neutral value (ERERR CONF)")
        csrs = t.supervisor.csrs
        rx = self.receiving.get(t.tile)
        if rx is None:
            if self.delivery.source(value) is None:  # nothing arrives: no receiver to follow
                csrs[INCOMING_MUX] = value
                return
            rx = self._receiver(t)
        rx.muxes.append((event, value))
        csrs[INCOMING_MUX] = value

    def pic(self, t: TileState, c: Context, select: int, value: int, event: int) -> None:
        """A PIC write at ``event``: the incoming pointer (select 0: word
        address ``value``) or format (1: 32-bit items only are modelled)."""
        if select == FORMAT and value:
            raise not_modelled(c, f"incoming format {value} (64-bit receives)")
        rx = self.receiving.get(t.tile) or self._receiver(t)
        rx.pending.append((event, POINTER if select == 0 else FORMAT, value))

    def put(self, t: TileState, c: Context, index: int, value: int) -> bool:
        """A `put` to an exchange CSR: True if it was one this module acts on."""
        if not self.has_fabric:
            return False
        if index == INCOMING_MUX:
            self.mux(t, c, value, t.events + 1)
        elif index == INCOMING_MUXPAIR:
            self.xpic(t, c, 1, value & 0x1FFF, t.events + 1)
            t.supervisor.csrs[index] = value
        elif index == INCOMING_FORMAT and value & 3:
            raise not_modelled(c, f"incoming format {value & 3} (64-bit receives)")
        else:
            return False
        return True

    def _receiver(self, t: TileState) -> Receiving:
        rx = self.receiving[t.tile] = Receiving([(NEVER, int(t.supervisor.csrs[INCOMING_MUX]))])
        if t.tile not in self.python:
            self.python.add(t.tile)
            self.rewatch(t)
        return rx

    # --- what the scheduler asks ----------------------------------------------------
    def _reached(self, tile: int) -> int | None:
        """How far ``tile``'s sends are logged; None: it sends no more this phase."""
        f = self.arrays.fields[tile, 0]
        if tile not in self.running or f[native.STATUS] != _ACTIVE or f[native.WAIT] in _DONE:
            return None
        return int(self.arrays.counters[tile, native.EVENTS])

    def ready(self, t: TileState, c: Context) -> bool:
        """Resolve receiver ``t`` up to its count before ``c`` issues;
        False if the tile must stand still (a sender has to catch up) or
        the supervisor just took a receive error."""
        rx = self.receiving.get(t.tile)
        if rx is None:
            return True
        s = t.supervisor
        if s.status is not Status.ACTIVE:  # its count stands: what arrives lands when the phase ends
            return True
        try:
            blocked = self.delivery.resolve(t.tile, rx, self.sent, t.events, self._reached, s.pc)
        except ReceiveError as error:
            self._failed(t, error)
            return c.number != 0
        if blocked is not None:
            self.waiting[t.tile] = (*blocked, s.wait)
            s.wait = Wait.EXCHANGE
            return False
        self._quiet(t, rx)
        return True

    def _quiet(self, t: TileState, rx: Receiving) -> None:
        """Let ``t`` go back to the native loop once nothing can arrive."""
        if not rx.pending and self.delivery.source(rx.mux()) is None and rx.done >= rx.muxes[-1][0] - 1:
            self._drop(t)

    def _release(self, t: TileState) -> None:
        """``t`` no longer waits for a sender."""
        held = self.waiting.pop(t.tile, None)
        if held is not None and t.supervisor.wait is Wait.EXCHANGE:
            t.supervisor.wait = held[2]

    def _drop(self, t: TileState) -> None:
        self.receiving.pop(t.tile, None)
        self._release(t)
        if t.tile in self.python:
            self.python.discard(t.tile)
            self.rewatch(t)

    def _failed(self, t: TileState, error: ReceiveError) -> None:
        t.receive_error = error.code
        self._drop(t)
        etype = Etype.EXCONF if error.code == BAD_CONFIGURATION else Etype.EXERR
        if t.supervisor.status is Status.ACTIVE:
            self.fault(t, t.supervisor, TileFault(etype, ExceptionCause.EXCHANGE, error.address, str(error)))

    def settle(self) -> bool:
        """Let receivers go on whose sender has caught up or finished;
        whether one did. (A receiver never waits for a sender that waits
        for it: each needs only words sent 18 or more events before its
        own count, so two such waits would each need the other ahead.)"""
        released = False
        for tile, (sender, event, _) in list(self.waiting.items()):
            reached = self._reached(sender)
            if reached is None or reached >= event:
                self._release(self.state(tile))
                released = True
        return released

    def _resolve_all(self, t: TileState) -> None:
        rx = self.receiving.get(t.tile)
        self._release(t)
        if rx is None:
            return
        try:
            self.delivery.resolve(t.tile, rx, self.sent, 1 << 40, None, t.supervisor.pc)
        except ReceiveError as error:
            self._failed(t, error)
            return
        self._quiet(t, rx)

    def end_phase(self, tiles: list[int]) -> None:
        """Every member reached a sync: every word of the phase lands, and
        ``tiles`` (released from it) count events afresh, their incoming
        delta from $INCOMING_SINIT (the sync copies it)."""
        for tile in sorted(self.receiving):
            self._resolve_all(self.state(tile))
        self.sent.clear()
        for tile in list(self.receiving):  # still selecting a tile: it receives in the next phase too
            rx = self.receiving[tile]
            self.receiving[tile] = Receiving([(NEVER, rx.mux())])
        if tiles:
            index = np.array(tiles, np.int64)
            self.arrays.counters[index, native.EVENTS] = 0
            csrs = self.arrays.csrs[index, 0]
            csrs[:, INCOMING_DELTA] = csrs[:, INCOMING_SINIT]
            self.arrays.csrs[index, 0] = csrs

    def start(self, t: TileState) -> None:
        """``t`` starts afresh (the host starts it): no exchange of its own under way."""
        t.events = 0
        self.sent.pop(t.tile, None)
        self._drop(t)
        if self.has_fabric and self.delivery.source(int(t.supervisor.csrs[INCOMING_MUX])) is not None:
            self._receiver(t)
