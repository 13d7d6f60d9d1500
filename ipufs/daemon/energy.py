# The energy each IPU has drawn since the daemon started, for the
# exporter's energy counter (docs/monitoring.md): the integral over time of
# the power model's figure (ipufs/model/power.py) driven by the tiles'
# busy time exactly as Utilisation samples it. Between two readings the
# busy tile-seconds are known exactly (TileTime.cumulative), so the energy
# of that span is the power at its mean utilisation times its length, the
# power being linear in utilisation below the rated cap; the clock is the
# one in force at the reading (it changes only by a telemetry fault, which
# is counted from the next reading on). Pure arithmetic on given times.
from __future__ import annotations

from ipufs.daemon.utilisation import Utilisation
from ipufs.model.power import ipu_power_w


class EnergyMeter:
    """Joules per IPU, advanced at each reading."""

    def __init__(self, utilisation: Utilisation) -> None:
        self.utilisation = utilisation
        now = utilisation.clock()
        #: per IPU: (time of the last reading, busy tile-seconds then, joules)
        self._last = [(now, self._busy(i, now), 0.0) for i in range(len(utilisation.ipus))]

    def _busy(self, ipu: int, t: float) -> float:
        busy = self.utilisation.ipus[ipu].cumulative(t)
        assert busy is not None  # the latest time is always known
        return busy

    def joules(self, ipu: int, board_type: str, clock_mhz: int) -> float | None:
        """The energy IPU ``ipu`` has drawn so far; None where the board
        has no per-IPU power figure (C2, C600: `ipu power` is N/A)."""
        if ipu_power_w(board_type, clock_mhz, 0.0) is None:
            return None
        now = self.utilisation.clock()
        then, busy_then, joules = self._last[ipu]
        busy_now = self._busy(ipu, now)
        span = now - then
        if span > 0:
            tiles = self.utilisation.ipus[ipu].tiles
            share = (busy_now - busy_then) / (tiles * span)
            watts = ipu_power_w(board_type, clock_mhz, share)
            assert watts is not None
            joules += watts * span
            self._last[ipu] = (now, busy_now, joules)
        return joules
