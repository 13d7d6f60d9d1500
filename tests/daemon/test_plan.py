# Fault plans parsed in memory: a typo in a table or key is refused with
# the closest name, never loaded as "0 faults"; every trigger and count is
# checked (NaN, infinities, negatives, bools); an empty plan clears.
from __future__ import annotations

import re

import pytest

from ipufs.daemon.faults import FaultError
from ipufs.daemon.fields import Limits
from ipufs.daemon.plan import FaultPlan

LIMITS = Limits(ipus=2, tiles=1216, contexts=7)
GOOD = """
seed = 3
[[fault]]
kind = "telemetry"
ipu = 1
power_mw = 4000
every = 2
times = 2
"""


def test_a_plan_fires_as_written() -> None:
    plan = FaultPlan.parse(GOOD, LIMITS)
    fired = [len(plan.access(1)) for _ in range(6)]
    assert fired == [0, 1, 0, 1, 0, 0]
    assert plan.log == [(1, 2, "telemetry ipu=1 power_mw=4000"), (1, 4, "telemetry ipu=1 power_mw=4000")]


def test_an_empty_plan_has_no_faults() -> None:
    assert FaultPlan.parse("", LIMITS).entries == []


@pytest.mark.parametrize("text,message", [
    ('[[faults]]\nkind = "reset"\nafter = 1', "a plan has no key or table 'faults'; did you mean fault?"),
    ('sed = 1', "a plan has no key or table 'sed'; did you mean seed?"),
    ('[[fault]]\nkind = "exception"\ncouse = "parity"\nafter = 1', "fault 1: exception takes no 'couse'; did you mean cause?"),
    ('[[fault]]\nkind = "reset"\naftr = 1', "fault 1: reset takes no 'aftr'; did you mean after?"),
    ('[fault]\nkind = "reset"', "fault must be tables: write each as [[fault]]"),
    ('fault = [1]', "fault must be tables"),
    ('seed = nan', "seed must be an integer"),
    ('seed = true', "seed must be an integer"),
    ('[[fault]]\nkind = "reset"\nat = nan', "fault 1: at must be seconds 0..86400, got nan"),
    ('[[fault]]\nkind = "reset"\nat = inf', "fault 1: at must be seconds"),
    ('[[fault]]\nkind = "reset"\nat = -1', "fault 1: at must be seconds"),
    ('[[fault]]\nkind = "reset"\nprobability = nan', "fault 1: probability must be a number 0..1"),
    ('[[fault]]\nkind = "reset"\nprobability = 1.5', "fault 1: probability must be a number 0..1"),
    ('[[fault]]\nkind = "reset"\nafter = 0', "fault 1: after must be an integer 1.."),
    ('[[fault]]\nkind = "reset"\nevery = true', "fault 1: every must be an integer 1.."),
    ('[[fault]]\nkind = "reset"\nafter = 1\ntimes = 0', "fault 1: times must be an integer 1.."),
    ('[[fault]]\nkind = "reset"\nafter = 1\nevery = 1', "exactly one of after, every, at, probability"),
    ('[[fault]]\nkind = "telemetry"\ntemperature_mc = -1\nafter = 1', "fault 1: temperature_mc must be an integer 0..0xffffffff"),
    ('[[fault]]\nkind = "telemetry"\nclock_mhz = 0x100000000\nafter = 1', "fault 1: clock_mhz must be an integer 0..0xffffffff"),
    ('[[fault]]\nkind = "icu-timeout"\nfor = nan\nafter = 1', "fault 1: for must be seconds"),
    ('[[fault]]\nkind = "reset"\nipu = 2\nafter = 1', "fault 1: ipu must be an integer 0..1, got 2"),
    ('x = ', "not TOML"),
])
def test_mistakes_in_a_plan_are_refused_naming_them(text: str, message: str) -> None:
    with pytest.raises(FaultError, match=re.escape(message)):
        FaultPlan.parse(text, LIMITS)
