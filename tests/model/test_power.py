# The power model (ipufs/model/power.py) and the registers that show it:
# golden figures, worked by hand from the board table.
from __future__ import annotations

import pytest

from ipufs.abi.registers import REGISTERS
from ipufs.model import power
from ipufs.model.ipu import Ipu
from ipufs.model.profile import PROFILES, Region
from tests.model.test_ipu import sparse


@pytest.mark.parametrize(("clock", "utilisation", "watts"), [
    (1330, 0.0, 12.6),  # idle: static + clock tree, as before tiles ran
    (665, 0.0, 10.3),  # half the clock: half the clock tree
    (1330, 0.25, 12.6 + 137.4 / 4),
    (1330, 1.0, 150.0),  # every tile busy: the rated power
    (665, 1.0, 8.0 + (4.6 + 137.4) / 2),
    (2660, 1.0, 150.0),  # twice the clock would give 292 W: bounded by the rated power
    (1330, 1.5, 150.0),
])
def test_an_m2000_ipu(clock: int, utilisation: float, watts: float) -> None:
    assert power.ipu_power_w("M2000", clock, utilisation) == pytest.approx(watts)


def test_boards_without_a_sensor_per_ipu_have_none() -> None:
    assert power.ipu_power_w("C600", 1500, 1.0) is None and power.ipu_power_w("C2", 1600, 0.5) is None
    assert power.ipu_power_mw("C600", 1500, 10_000) == 0
    assert power.ipu_power_w("nonsense", 1500, 0.0) is None


def _ipu(profile: str) -> Ipu:
    p = PROFILES[profile]
    return Ipu(p, 0, {r: sparse(p.region_size(r)) for r in Region})


def _reg(ipu: Ipu, name: str) -> int:
    return int(ipu.config.words[REGISTERS[name].index])


def test_the_registers_follow_the_utilisation_and_the_clock() -> None:
    ipu = _ipu("ipu2")
    assert (_reg(ipu, "UTILISATION"), _reg(ipu, "IPU_POWER")) == (0, 12_600)
    ipu.set_utilisation(2500)
    assert (_reg(ipu, "UTILISATION"), _reg(ipu, "IPU_POWER")) == (2500, 46_950)
    ipu.set_telemetry(clock_mhz=665)
    assert _reg(ipu, "IPU_POWER") == 8_000 + round((4_600 + 137_400 / 4) / 2)
    ipu.reset()  # the daemon's window, not a reset, brings it back to idle
    assert _reg(ipu, "UTILISATION") == 2500
    with pytest.raises(ValueError, match="out of range"):
        ipu.set_utilisation(10_001)


def test_a_c600_shows_its_utilisation_and_no_ipu_power() -> None:
    ipu = _ipu("ipu21")
    ipu.set_utilisation(10_000)
    assert (_reg(ipu, "UTILISATION"), _reg(ipu, "IPU_POWER")) == (10_000, 0)
