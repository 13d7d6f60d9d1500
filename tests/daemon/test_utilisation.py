# The utilisation the daemon samples (ipufs/daemon/utilisation.py) from
# counts it is fed at given times: golden figures, worked by hand.
from __future__ import annotations

import pytest

from ipufs.daemon.utilisation import TileTime, Utilisation


def fed(samples: list[tuple[float, int]], tiles: int = 100) -> TileTime:
    t = TileTime(tiles, 0.0, window=1.0)
    for now, busy in samples:
        t.sample(now, busy)
    return t


# 50 of 100 tiles busy from 0.2 s, all from 0.7 s, none from 1.2 s.
RUN = [(0.2, 50), (0.7, 100), (1.2, 0)]


def test_the_window_holds_busy_tile_seconds_over_tile_seconds() -> None:
    t = fed(RUN)
    assert t.utilisation(0.2) == 0.0
    assert t.utilisation(0.7) == pytest.approx(0.25)  # 50 tiles x 0.5 s of 100 tiles x 1 s
    assert t.utilisation(1.2) == pytest.approx(0.75)  # 50 x 0.5 + 100 x 0.5
    assert t.utilisation(1.7) == pytest.approx(0.5)  # 100 x 0.5: no sample since, the level holds
    assert t.utilisation(2.2) == 0.0 and t.idle(2.2)
    assert not t.idle(2.1)


def test_a_level_holds_between_samples_and_counts_up_to_now() -> None:
    t = fed([(0.5, 10)])
    assert t.utilisation(1.0) == pytest.approx(0.05)  # 10 tiles x 0.5 s
    assert t.utilisation(5.0) == pytest.approx(0.10)  # 10 of 100 tiles, the whole window
    assert not t.idle(5.0)


def test_samples_of_the_same_level_change_nothing() -> None:
    steady, sampled = fed([(0.0, 40)]), fed([(0.0, 40), *((i / 100, 40) for i in range(1, 300))])
    assert steady.utilisation(3.0) == sampled.utilisation(3.0) == pytest.approx(0.4)


def test_a_session_is_the_busy_share_of_its_own_time() -> None:
    t = fed(RUN)
    assert t.between(0.1, 1.1) == pytest.approx(0.65)  # 50 x 0.5 + 100 x 0.4, over 100 x 1 s
    assert t.between(0.0, 0.2) == 0.0
    assert t.between(1.5, 1.5) == 0.0


def test_pinned_times_outlive_the_window() -> None:
    t = TileTime(100, 0.0, window=1.0)
    t.sample(0.2, 50, pin=(0.1,))
    for i in range(1, 50):  # busy changes every 0.1 s for 5 s: the old marks go
        t.sample(0.2 + i / 10, 50 + i % 2, pin=(0.1,))
    assert t.cumulative(0.15) is None  # forgotten
    assert t.cumulative(0.1) == 0.0
    # none busy to 0.2 s, 50 to 0.3 s, then 50 or 51 for 0.1 s each until 5.1 s
    assert t.between(0.1, 5.1) == pytest.approx((50 * 0.1 + sum(0.1 * (50 + i % 2) for i in range(1, 49)))
                                                / (100 * 5.0))
    assert t.between(0.1, 5.1) == pytest.approx(0.4948)
    t.sample(5.2, 0)  # no longer asked for: forgotten
    assert t.between(0.1, 5.2) is None


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_utilisation_in_hundredths_and_the_session_of_the_attachment() -> None:
    clock = Clock()
    sessions: dict[int, tuple[float, float | None]] = {}
    u = Utilisation(1472, 2, sessions.get, clock=clock)
    assert u.session(0) is None and u.idle()
    sessions[0] = (10.0, None)  # attached at 10 s
    clock.now = 10.5
    assert u.sample(0, 368) == 0  # a quarter of the tiles busy from 10.5 s
    clock.now = 11.0
    assert u.sample(0, 368) == 1250  # 12.50 %: a quarter for half the window
    assert u.session(0) == pytest.approx(0.125)
    clock.now = 11.5
    assert u.sample(0, 368) == 2500
    assert u.sample(1, 0) == 0
    sessions[0] = (10.0, 12.0)  # detached at 12 s
    clock.now = 13.0
    assert u.sample(0, 0) == 2500  # busy until 13 s, as last sampled: 368 tiles, half the window
    assert u.session(0) == pytest.approx(0.1875)  # 1.5 s of a quarter, over 2 s
    clock.now = 14.0
    assert u.sample(0, 0) == 0 and u.idle()
    assert u.session(0) == pytest.approx(0.1875)  # the last session, kept
