# The exchange between one IPU's tiles, as its scheduler runs them. The
# state and the rules are in C (native/src/executor_exchange.h), which the
# native loop runs itself and the Python path calls through the loop's
# exchange_* methods: each tile counts exchange events from its release of
# the last sync; a send logs the words it puts on the fabric at its events;
# a receiver's multiplexer and pointer writes are kept with the events they
# take effect at, and the receiver is resolved before each instruction its
# tile issues, up to its own count, from the fabric's timing (fabric.py).
# A receiver whose sender has yet to catch up stands still
# (Wait.EXCHANGE); when every member reaches the next sync, every receiver
# is resolved in full and the counts start again. The result does not
# depend on how the scheduler slices the tiles. This module words the
# faults as TileFaults and raises the receive errors on their tiles.
# docs/exchange.md.
from __future__ import annotations

from collections.abc import Callable

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import native_exchange as nx
from ipufs.model.executor.host_exchange import HostExchange
from ipufs.model.executor.native import Loop
from ipufs.model.executor.state import Context, Etype, Status, TileFault, TileState
from ipufs.model.host_packets import NEUTRAL
from ipufs.model.profile import Profile
from ipufs.model.tiles import TileMemory

#: the multiplexer's CSR, the supervisor's (csr.INCOMING_MUX: csr.py's type-only import of
#: ports.py, which names Exchange, would close a circle)
INCOMING_MUX = 0xA0

#: the receive-error codes of CTXT_STS.ERERR (TileExchangeReceiveError)
CLASH_INSTR, CLASH_IFETCH, BAD_ADDRESS, BAD_CONFIGURATION = 1, 2, 3, 6
_RECEIVE_ERRORS = {nx.XX_FAULTS["receive_read"]: CLASH_INSTR, nx.XX_FAULTS["receive_fetch"]: CLASH_IFETCH,
                   nx.XX_FAULTS["receive_address"]: BAD_ADDRESS}
#: what a fault does (Execution.fault)
Fault = Callable[[TileState, Context, TileFault], None]
_K = nx.XX_FAULTS


def not_modelled(c: Context, what: str) -> TileFault:
    return TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc, f"{what}: not modelled by ipufs "
                     "(docs/exchange.md, \"Not modelled\")")


class Exchange:
    """The exchange of one IPU's tiles: ``loop()`` gives the native loop
    that holds its state (made on first use), ``made()`` it if it was
    made, ``state(tile)`` a tile's TileState, ``fault`` raises an
    exception on a context; ``host`` carries out the tiles' host packets."""

    def __init__(self, profile: Profile, tiles: TileMemory, loop: Callable[[], Loop],
                 made: Callable[[], Loop | None], state: Callable[[int], TileState], fault: Fault) -> None:
        self.has_fabric = profile.tile_numbering == "c600"
        self.profile = profile
        self.tiles = tiles
        self.loop = loop
        #: the loop if it was made: an IPU that never ran holds no exchange state
        self.made = made
        self.state = state
        self.fault = fault
        physical = profile.tile_map.physical
        self.host = HostExchange(tiles, lambda: self.loop().xx, lambda tile: int(physical[tile]))

    def reset(self) -> None:
        self.loop().xx.reset()

    # --- what the exchange instructions do (exchange_ops.py) -------------------------
    def issue(self, t: TileState, c: Context, op: int, operands: tuple[int, ...], mnemonic: str) -> None:
        """Exchange instruction ``op`` (nx.XX_*) of context ``c``."""
        fault = self.loop().xx.issue(t.tile, c.number, op, operands, c.pc)
        if fault is not None:
            raise self._worded(t, c, fault, mnemonic)

    def put(self, t: TileState, c: Context, index: int, value: int) -> bool:
        """A `put` to an exchange CSR: True if it was one this module acts on."""
        done = self.loop().xx.put(t.tile, index, value, c.pc)
        if isinstance(done, nx.ExchangeFault):
            raise self._worded(t, c, done, "put")
        return done

    def receive(self, t: TileState, c: Context) -> None:
        """`sync 0` (RECV): ``t``'s host packets carried out (host_exchange.py)."""
        if not self.has_fabric:
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc,
                            f"sync 0: the host exchange of {self.profile.name} is not public: only the GC200's "
                            "(ipu2, ipu21) is modelled")
        self.host.receive(t, c)

    def _worded(self, t: TileState, c: Context, fault: nx.ExchangeFault, mnemonic: str) -> TileFault:
        kind, address, value, _, _ = fault
        if kind == _K["not_public"]:
            return TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc,
                             f"{mnemonic}: the exchange of {self.profile.name} is not public (its fabric's timing): "
                             "only the GC200's (ipu2, ipu21) is modelled")
        if kind == _K["paired_send"]:
            return not_modelled(c, "64-bit (paired) sends")
        if kind == _K["paired_receive"]:
            return not_modelled(c, "paired (64-bit) receives")
        if kind == _K["format"]:
            return not_modelled(c, f"incoming format {value} (64-bit receives)")
        if kind == _K["mux_value"]:
            t.receive_error = BAD_CONFIGURATION
            return TileFault(Etype.EXCONF, ExceptionCause.EXCHANGE, c.pc, f"multiplexer value 0x{value:x} names "
                             "no tile, host endpoint or the neutral value (ERERR CONF)")
        if kind == _K["send_address"]:
            return TileFault(Etype.INVALID_ADDR, ExceptionCause.INVALID_ADDRESS, address,
                             f"send of {value} words from 0x{address:x}: no tile memory there")
        if kind == _K["send_fetch"]:
            return TileFault(Etype.CONFLICT, ExceptionCause.EXCHANGE, c.pc, f"send from 0x{value:x} reads the "
                             "memory element its code is fetched from")
        raise MemoryError("the exchange's logs")

    # --- what the scheduler asks ----------------------------------------------------
    def ready(self, t: TileState, c: Context) -> bool:
        """Resolve receiver ``t`` up to its count before ``c`` issues;
        False if the tile must stand still (a sender has to catch up) or
        the supervisor just took a receive error."""
        rc = self.loop().xx.ready(t.tile)
        if rc == nx.XX_FAILED:
            self._failed(t)
            return c.number != 0
        return bool(rc == nx.XX_RESOLVED)

    def receiving(self, tile: int) -> bool:
        """Whether ``tile`` is resolved before each issue."""
        loop = self.made()
        return loop is not None and bool(loop.xx.receiving[tile])

    def _failed(self, t: TileState) -> None:
        error = self.loop().xx.error(t.tile)
        if error is None:
            return
        kind, address, value, _, event = error
        code = _RECEIVE_ERRORS.get(kind)
        if code is None:
            raise MemoryError("the exchange's logs")
        t.receive_error = code
        if code == BAD_ADDRESS:
            first = self.tiles.base
            message = (f"exchange store of {value} words at 0x{address:x}: no tile memory there "
                       f"(0x{first:x}..0x{first + self.tiles.sram:x})")
        elif code == CLASH_IFETCH:
            message = (f"exchange store at 0x{address:x} (event {event}) clashes with the fetch of the code at "
                       f"0x{value:x}")
        else:
            message = (f"exchange store at 0x{address:x} (event {event}) clashes with this tile's send reading "
                       "that element")
        if t.supervisor.status is Status.ACTIVE:
            self.fault(t, t.supervisor, TileFault(Etype.EXERR, ExceptionCause.EXCHANGE, address, message))

    @property
    def waiting(self) -> int:
        """Receivers standing still for a sender."""
        loop = self.made()
        return 0 if loop is None else loop.xx.waiting()

    def settle(self) -> bool:
        """Let receivers go on whose sender has caught up or finished;
        whether one did. (A receiver never waits for a sender that waits
        for it: each needs only words sent 18 or more events before its
        own count, so two such waits would each need the other ahead.)"""
        return self.loop().xx.release() > 0

    def end_phase(self, tiles: list[int]) -> None:
        """Every member reached a sync: every word of the phase lands, and
        ``tiles`` (released from it) count events afresh, their incoming
        delta from $INCOMING_SINIT (the sync copies it)."""
        for tile in self.loop().xx.end_phase(tiles):
            self._failed(self.state(tile))

    def start(self, t: TileState) -> None:
        """``t`` starts afresh (the host starts it): no exchange of its own
        under way; a receiver if its multiplexer names a tile."""
        loop = self.made()
        names_tile = self.has_fabric and int(t.supervisor.csrs[INCOMING_MUX]) & 0x1FFF < self.profile.tiles
        if loop is None and not names_tile:
            t.events = 0
            return
        self.loop().xx.start(t.tile)
