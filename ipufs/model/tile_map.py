# Logical and physical tile numbers. Programs, the exchange BAR's windows,
# the TDI aperture and ipufs's tools number tiles logically; the per-tile
# TDI registers, $TILE_ID and the exchange fabric use the physical number
# of where a tile sits on the die. The GC2 numbers them alike (ipufs's
# own: nothing public says otherwise). The GC200 of a C600 lays its tiles
# out in a grid of 23 rows by 64 columns: logical tiles go in pairs
# (physical p and p + 2), 23 pairs to a column pair, top to bottom in even
# blocks and bottom to top in odd ones (osmarks/ipu-stack,
# crates/ipu-target/src/topology.rs, c600_logical_to_physical; its captured
# configuration writes every tile's TDI in exactly this order).
from __future__ import annotations

from dataclasses import dataclass

#: the GC200's grid: rows of physical tiles, columns per row, tiles per block
ROWS, COLUMNS = 23, 64


@dataclass(frozen=True, slots=True)
class TileMap:
    """A permutation of the tiles: ``physical[logical]`` and its inverse."""

    physical: tuple[int, ...]
    logical: tuple[int, ...]

    @classmethod
    def of(cls, physical: list[int]) -> TileMap:
        if sorted(physical) != list(range(len(physical))):
            raise ValueError("a tile map is a permutation of the tiles")
        logical = [0] * len(physical)
        for t, p in enumerate(physical):
            logical[p] = t
        return cls(tuple(physical), tuple(logical))

    @property
    def identity(self) -> bool:
        return all(t == p for t, p in enumerate(self.physical))


def identity_map(tiles: int) -> TileMap:
    return TileMap.of(list(range(tiles)))


def c600_physical(logical: int) -> int:
    """The physical tile of logical tile ``logical`` on a C600."""
    pair, lane = divmod(logical, 2)
    block, r = divmod(pair, ROWS)
    row = r if block % 2 == 0 else ROWS - 1 - r
    column = 4 * (block // 2) + block % 2
    return COLUMNS * row + column + 2 * lane


def c600_map(tiles: int) -> TileMap:
    """The C600's map; it covers its 1,472 tiles (23 x 64)."""
    if tiles != ROWS * COLUMNS:
        raise ValueError(f"the C600's tile map covers {ROWS * COLUMNS} tiles, not {tiles}")
    return TileMap.of([c600_physical(t) for t in range(tiles)])
