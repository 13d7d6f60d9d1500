# `sync 0` (RECV): a tile's host exchange. What a tile sends while its own
# multiplexer holds a host endpoint (0x600 + ...) is kept as its host
# packets (native/src/executor_exchange.h); at `sync 0` they are parsed
# (ipufs/model/host_packets.py) and carried out in order: a tile->host
# write goes to the host's memory (the attached buffers, through the
# HostMemory port: ipufs/model/host_memory.py), a host->tile read request is answered at once
# into the tile's window, an XREQ bitmap is taken, a zero-byte read (the
# close) is answered with nothing. The sync completes when the words that
# arrived (each read's words, one for each close) are $INCOMING_DCOUNT;
# otherwise, where a C600 would wait, the tile faults. The packets'
# headers and the programs are the record's (osmarks/ipu-stack,
# exchange.rs); when they are carried out, the arrivals' count and every
# error are ipufs's own. docs/exchange.md, "Host exchange".
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor.native_exchange import NativeExchange
from ipufs.model.executor.state import Context, Etype, TileFault, TileState
from ipufs.model.host_memory import HostMemory, HostRangeError, NoHostMemory
from ipufs.model.host_packets import HostRead, HostWrite, PacketError, parse
from ipufs.model.tiles import TileMemory

#: the supervisor's $INCOMING_DCOUNT (csr.py's, which imports what imports this module)
INCOMING_DCOUNT = 0xA6
#: CTXT_STS.ERERR of a bad packet and of a host range no buffer covers (exchange.py's codes)
BAD_ADDRESS, BAD_CONFIGURATION = 3, 6


class HostExchange:
    """The host side of one IPU's exchange: ``xx`` gives the tiles' host
    packets, ``physical`` maps logical tiles to physical."""

    def __init__(self, tiles: TileMemory, xx: Callable[[], NativeExchange], physical: Callable[[int], int]) -> None:
        self.tiles = tiles
        self.xx = xx
        self.physical = physical
        #: where the packets read and write: the driver gives its attached buffers (driver/dma.py)
        self.memory: HostMemory = NoHostMemory()

    def receive(self, t: TileState, c: Context) -> None:
        """`sync 0` of ``t``'s supervisor: its host packets since its last
        `sync 0` carried out; raises a TileFault if one is bad or the
        words that arrived are not $INCOMING_DCOUNT."""
        words = self.xx().host(t.tile)
        try:
            packets = parse(words, self.physical(t.tile))
        except PacketError as exc:
            t.receive_error = BAD_CONFIGURATION
            raise TileFault(Etype.EXCONF, ExceptionCause.EXCHANGE, c.pc, f"sync 0: host packet {exc}") from None
        arrived = 0
        for p in packets:
            if isinstance(p, HostWrite):
                self._move(t, c, p)
            elif isinstance(p, HostRead):
                arrived += self._move(t, c, p)
        expected = int(c.csrs[INCOMING_DCOUNT])
        if arrived != expected:
            raise TileFault(Etype.EXERR, ExceptionCause.EXCHANGE, c.pc,
                            f"sync 0: {arrived} words arrived from the host, $INCOMING_DCOUNT is {expected} "
                            "(a C600 would wait; ipufs answers every request at sync 0 and faults)")
        c.csrs[INCOMING_DCOUNT] = 0

    def _move(self, t: TileState, c: Context, p: HostWrite | HostRead) -> int:
        """Packet ``p`` carried out: the words that arrived (a close's
        answer counts one and carries nothing: ours)."""
        try:
            if isinstance(p, HostWrite):
                self.memory.write(p.host_offset, p.data)
                return 0
            if not p.length:
                return 1
            data = self.memory.read(p.host_offset, p.length)
        except HostRangeError as exc:
            t.receive_error = BAD_ADDRESS
            what = "write to" if isinstance(p, HostWrite) else "read of"
            raise TileFault(Etype.EXERR, ExceptionCause.EXCHANGE, c.pc,
                            f"sync 0: host {what} host offset 0x{p.host_offset:x}: {exc}") from None
        self.tiles.write_words(t.tile, p.address, np.frombuffer(data, np.uint32))
        return p.length // 4

