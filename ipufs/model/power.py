# The power model behind the IPU_POWER register, "ipu power" and the
# figures every tool shows of it (docs/monitoring.md, "Power model"; ours).
# ipufs measures nothing, so an IPU's power is computed from what the device
# shows: its clock (the CLOCK register) and how busy its tiles are (the
# UTILISATION register, which the daemon samples from what the tiles run:
# docs/execution.md, "Utilisation and power"). Per IPU:
#
#     P = static + clock_tree * f/f_nominal + tiles * f/f_nominal * utilisation
#
# bounded by the board's rated power (its TDP): the usual split of a chip's
# power into a leakage part and a switching part proportional to frequency
# and activity. The three figures per board are ipufs's own: the static and
# clock-tree parts sum to the idle board power of Graphcore's C600 sample
# (12.6 W at rest), and the three sum to the profile's rated power at full
# activity. Only boards with a sensor per IPU report it (the IPU-Machine,
# M2000); on PCIe cards (C2, C600) gc-info prints "ipu power: N/A" and so
# does ipufs. Pure arithmetic: no clocks, no I/O.
from __future__ import annotations

from dataclasses import dataclass

#: UTILISATION's unit: hundredths of a percent (10000 = every tile busy),
#: the precision gc-info prints ("44.03%").
FULL = 10_000


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
        """At the nominal clock with every tile busy: the board's TDP per IPU."""
        return self.idle_w + self.tiles_w


#: Keyed by the board type as BOARD_TYPE names it; rated power as in the
#: device profiles (ipufs/model/profile.py: 75, 150, 185 W).
BOARDS: dict[str, BoardPower] = {
    "C2": BoardPower(False, 1600, 8.0, 4.6, 62.4),
    "M2000": BoardPower(True, 1330, 8.0, 4.6, 137.4),
    "C600": BoardPower(False, 1500, 8.0, 4.6, 172.4),
}


def ipu_power_w(board_type: str, clock_mhz: int, utilisation: float) -> float | None:
    """The model's power of one IPU in watts at ``clock_mhz`` with a share
    ``utilisation`` (0..1) of its tile-time busy, never above the board's
    rated power; None where the board has no per-IPU sensor (or is
    unknown): the attribute is then N/A."""
    board = BOARDS.get(board_type)
    if board is None or not board.ipu_sensor:
        return None
    scale = clock_mhz / board.nominal_clock_mhz
    busy = max(0.0, min(1.0, utilisation))
    return min(board.rated_w, board.static_w + (board.clock_tree_w + board.tiles_w * busy) * scale)


def ipu_power_mw(board_type: str, clock_mhz: int, utilisation_bp: int) -> int:
    """IPU_POWER: ipu_power_w in milliwatts for a utilisation in hundredths
    of a percent (UTILISATION's unit), rounded; 0 where the board has no
    per-IPU sensor (a real figure is never 0: the static part remains)."""
    watts = ipu_power_w(board_type, clock_mhz, utilisation_bp / FULL)
    return 0 if watts is None else round(watts * 1000)
