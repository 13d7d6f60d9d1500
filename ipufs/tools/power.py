# The power model behind "ipu power" (docs/monitoring.md, "Power model").
# ipufs measures nothing, so an IPU's power is computed from what the device
# shows: its clock (the CLOCK register) and how busy its tiles are. Per IPU:
#
#     P = static + clock_tree * f/f_nominal + tiles * f/f_nominal * activity
#
# the usual split of a chip's power into a leakage part and a switching part
# proportional to frequency and activity. The three figures per board are
# ipufs's own: the static and clock-tree parts sum to the idle board power
# of Graphcore's C600 sample (12.6 W at rest), and the three sum to the
# profile's rated power at full activity. Only boards with a sensor per IPU
# report it (the IPU-Machine, M2000); on PCIe cards (C2, C600) gc-info
# prints "ipu power: N/A" and so does ipufs.
from __future__ import annotations

from dataclasses import dataclass

#: How busy the tiles are, 0..1. Tiles run code now (ipufs/model/executor/),
#: but the executed instructions are not yet counted into this figure, so
#: every figure is the idle one, at the IPU's present clock.
TILE_ACTIVITY = 0.0


@dataclass(frozen=True, slots=True)
class BoardPower:
    """One board type's figures, in watts per IPU."""

    ipu_sensor: bool  # whether the board measures each IPU (else N/A)
    nominal_clock_mhz: int
    static_w: float
    clock_tree_w: float
    tiles_w: float

    @property
    def idle_w(self) -> float:
        """At the nominal clock with no tile busy."""
        return self.static_w + self.clock_tree_w

    @property
    def rated_w(self) -> float:
        """At the nominal clock with every tile busy."""
        return self.idle_w + self.tiles_w


#: Keyed by the board type as BOARD_TYPE names it; rated power as in the
#: device profiles (ipufs/model/profile.py: 75, 150, 185 W).
BOARDS: dict[str, BoardPower] = {
    "C2": BoardPower(False, 1600, 8.0, 4.6, 62.4),
    "M2000": BoardPower(True, 1330, 8.0, 4.6, 137.4),
    "C600": BoardPower(False, 1500, 8.0, 4.6, 172.4),
}


def ipu_power_w(board_type: str, clock_mhz: int, activity: float = TILE_ACTIVITY) -> float | None:
    """The model's power of one IPU in watts, or None where the board has
    no per-IPU sensor (or is unknown): the attribute is then N/A."""
    board = BOARDS.get(board_type)
    if board is None or not board.ipu_sensor:
        return None
    scale = clock_mhz / board.nominal_clock_mhz
    return board.static_w + board.clock_tree_w * scale + board.tiles_w * scale * max(0.0, min(1.0, activity))
