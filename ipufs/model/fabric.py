# The exchange fabric of a GC200 (a C600's, and ipufs's GC200 of the
# IPU-M2000 too): for each ordered pair of tiles, when a word one sends
# reaches the other's receive multiplexer, and which of a send's two
# directions (its sctl bits 0 and 1) carries it there. The formulas are
# osmarks/ipu-stack's (crates/ipu-target/src/topology.rs: route
# displacement, direction, time_to_mux), which its exchange programs were
# planned with and validated on a C600; written here from their maths.
# Times count exchange events: a word that tile S puts on the fabric at S's
# event e is at D's multiplexer at D's event e + T(S, D) (each tile counts
# from its own release of the sync that opened the phase, so T mixes wire
# latency with the skew of that release, and is negative for most pairs).
# A physical tile number p is row p >> 6 (0..22) and column p & 63; its
# column group (p >> 2) & 15 has two mirrored halves. docs/execution.md,
# "Exchange".
from __future__ import annotations

import functools

import numpy as np
from numpy.typing import NDArray

from ipufs.model.tile_map import COLUMNS, ROWS, TileMap, c600_map

#: a word is stored this many events after it passed the multiplexer, plus
#: two per row of the receiver (the SDK's receive rows place their pointer
#: writes so: osmarks/ipu-stack docs/EXCHANGE_INSTRUCTION_REFERENCE.md,
#: lines 160-165, and exchange.rs's multicast rows)
STORE_LATENCY = 52

I64 = NDArray[np.int64]


def _fold(g: I64) -> I64:
    return np.where(g <= 7, g, 15 - g)


def route_displacement(s: I64, d: I64) -> I64:
    """The signed distance from source column group to destination, in
    the fabric's units (topology.rs, route_displacement)."""
    gs, gd = (s >> 2) & 15, (d >> 2) & 15
    mux = _fold(gs) + ((gs >> 3) ^ (s & 1))
    base = 6 * (_fold(gd) - mux)
    high = (d & 3) >= 2
    return base + np.where(high, np.where((gd >> 3) == (d & 1), 2, 4), np.where((gd >> 3) == (d & 3), 1, 5))


def direction(s: I64, d: I64) -> I64:
    """The sctl bit (1 or 2) a send from ``s`` must set for ``d`` to see it."""
    return np.where(route_displacement(s, d) <= 0, 2, 1)


def time_to_mux(s: I64, d: I64) -> I64:
    """T(S, D): events from S putting a word on the fabric to its being at
    D's multiplexer, each in its own tile's count (topology.rs, time_to_mux)."""
    gs, gd = (s >> 2) & 15, (d >> 2) & 15
    low = gs & 7

    def edge(g: I64) -> I64:
        return np.where(g <= 7, 4 * g, (4 * g) ^ 60)
    local = 8 * (gs >> 3) + ((s >> 3) & 3)
    crossing = local - gd + ((low >> 1) ^ 3)
    turn = np.where(((s >> 5) & 1) == ((d >> 5) & 1), low + 1, 16 - low)
    rows = 2 * ((s >> 6) - (d >> 6))
    time: I64 = crossing + edge(gs) + turn - edge(gd) + rows + np.abs(route_displacement(s, d)) - 34
    return time


class Fabric:
    """The fabric between one IPU's tiles, by logical tile number:
    ``time[s, d]`` (T), ``direction[s, d]`` (1 or 2) and each tile's
    ``latency`` from multiplexer to memory (STORE_LATENCY + 2 x its row)."""

    def __init__(self, tiles: TileMap) -> None:
        physical = np.array(tiles.physical, np.int64)
        s, d = physical[:, None], physical[None, :]
        self.physical = physical
        #: physical tile -> logical
        self.logical = np.array(tiles.logical, np.int64)
        self.time: NDArray[np.int16] = time_to_mux(s, d).astype(np.int16)
        self.direction: NDArray[np.uint8] = direction(s, d).astype(np.uint8)
        self.latency: I64 = STORE_LATENCY + 2 * (physical >> 6)

    @staticmethod
    @functools.cache
    def gc200() -> Fabric:
        """The GC200's fabric (built once per process: 6 MiB of tables)."""
        return Fabric(c600_map(ROWS * COLUMNS))
