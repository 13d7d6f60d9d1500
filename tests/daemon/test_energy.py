# The energy counter behind `ipufs_ipu_energy_joules_total` and the link
# error counts behind "link correctable error count": exact arithmetic on
# the times they are given (docs/monitoring.md, "The metrics").
from __future__ import annotations

import pytest

from ipufs.daemon.energy import EnergyMeter
from ipufs.daemon.utilisation import Utilisation
from ipufs.model.link import LinkErrors
from tests.daemon.test_utilisation import Clock


def test_energy_is_the_power_model_over_the_busy_time() -> None:
    clock = Clock()
    use = Utilisation(1000, 2, lambda ipu: None, clock=clock)
    meter = EnergyMeter(use)
    assert meter.joules(0, "M2000", 1330) == 0.0
    clock.now += 10  # idle: 12.6 W
    assert meter.joules(0, "M2000", 1330) == pytest.approx(126.0)
    use.sample(0, 250)  # a quarter of the tiles busy from now on
    clock.now += 4
    assert meter.joules(0, "M2000", 1330) == pytest.approx(126.0 + 4 * (12.6 + 137.4 / 4))
    use.sample(0, 0)
    clock.now += 2  # at half the clock, idle: 8 + 4.6 / 2 W
    assert meter.joules(0, "M2000", 665) == pytest.approx(126.0 + 4 * (12.6 + 137.4 / 4) + 2 * 10.3)
    assert meter.joules(1, "C600", 1500) is None  # no per-IPU power figure: no energy either


def test_busy_time_between_two_readings_counts_in_full() -> None:
    """Tiles that ran and stopped between two readings still count."""
    clock = Clock()
    use = Utilisation(100, 1, lambda ipu: None, clock=clock)
    meter = EnergyMeter(use)
    use.sample(0, 100)
    clock.now += 1
    use.sample(0, 0)
    clock.now += 9
    assert meter.joules(0, "M2000", 1330) == pytest.approx(150.0 + 9 * 12.6)


def test_link_errors_during_a_session() -> None:
    errors = LinkErrors()
    errors.add(2, at=1.0)
    errors.add(5, at=10.0)
    errors.add(1, at=20.0)
    assert errors.total == 8
    assert errors.between(5.0, 15.0) == 5 and errors.between(5.0, None) == 6 and errors.between(30.0, None) == 0
    with pytest.raises(ValueError):
        errors.add(-1, at=30.0)
