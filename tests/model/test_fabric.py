# The GC200's exchange fabric against the values the public record gives
# (osmarks/ipu-stack's topology: route displacement, direction, T) and
# the property the exchange's lazy resolution rests on.
from __future__ import annotations

import numpy as np
import pytest

from ipufs.model.fabric import STORE_LATENCY, Fabric, direction, route_displacement, time_to_mux
from ipufs.model.tile_map import c600_physical

# (source, destination) physical, displacement, direction, T: the
# topology's own checks and the planner rows of the record (C++ oracle and
# SDK rows), corners and both halves' boundary included.
SAMPLES = [
    (0, 2, 2, 1, -28), (0, 1, 5, 1, -25), (0, 4, 7, 1, -28), (0, 64, 1, 1, -31), (64, 0, 1, 1, -27),
    (0, 1408, 1, 1, -73), (1408, 0, 1, 1, 15), (0, 63, 2, 1, -28), (63, 0, 1, 1, -13), (0, 1471, 2, 1, -72),
    (1471, 0, 1, 1, 31), (0, 53, 13, 1, -23), (32, 260, -41, 2, 49), (53, 63, -10, 2, -14), (1024, 0, 1, 1, 3),
    (130, 0, 1, 1, -25), (192, 0, 1, 1, -23), (194, 0, 1, 1, -23), (256, 0, 1, 1, -21), (31, 32, -1, 2, -29),
    (32, 31, -2, 2, -12), (700, 701, -5, 2, -25), (5, 7, -2, 2, -28), (1, 1412, 1, 1, -78), (1440, 0, -47, 2, 112),
]


@pytest.mark.parametrize("s, d, displacement, way, t", SAMPLES)
def test_the_fabric_gives_the_records_values(s: int, d: int, displacement: int, way: int, t: int) -> None:
    a, b = np.int64(s), np.int64(d)
    assert (int(route_displacement(a, b)), int(direction(a, b)), int(time_to_mux(a, b))) == (displacement, way, t)


def test_the_tables_are_by_logical_tile_and_span_the_records_range() -> None:
    fabric = Fabric.gc200()
    assert fabric.time.shape == (1472, 1472)
    # logical 5..8 are physical 130, 192, 194, 256 (the Poplar row's sources)
    assert [int(fabric.time[t, 0]) for t in (5, 6, 7, 8)] == [-25, -23, -23, -21]
    assert int(fabric.time.min()) == -78 and int(fabric.time.max()) == 112
    assert set(np.unique(fabric.direction).tolist()) == {1, 2}
    assert int(fabric.latency[c600_physical(0)]) == STORE_LATENCY
    assert int(fabric.latency.max()) == STORE_LATENCY + 2 * 22


def test_every_word_is_stored_at_least_18_events_after_it_was_sent() -> None:
    # T(S, R) + the receiver's latency >= 18 for every pair: a receiver
    # never needs a word its sender sends later in its own count, which is
    # what lets exchange.py resolve receivers one at a time.
    fabric = Fabric.gc200()
    stored = fabric.time.astype(np.int64) + fabric.latency[None, :]
    np.fill_diagonal(stored, 1 << 20)
    assert int(stored.min()) == 18
