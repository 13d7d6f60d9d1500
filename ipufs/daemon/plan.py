# Fault plans: faults fired after N accesses to an IPU, every N accesses,
# at a time after the plan starts, or with a probability per access under a
# fixed seed, so that a failing CI run can be replayed exactly: the same
# sequence of accesses fires the same faults (docs/faults.md).
#
#     seed = 7
#     [[fault]]
#     kind = "parity"
#     ipu = 0
#     tile = 5
#     address = 0x40010
#     after = 100          # the 100th access to IPU 0's nodes
#
# An access is a request the daemon sees on one of the IPU's nodes (open,
# read, write, ioctl, poll); reads and writes that passthrough sends straight
# to memory, and stores through a mapping, are not seen and do not count.
# A plan is checked whole before it replaces the one in force: an unknown
# table or key (a typo) is refused, never ignored.
from __future__ import annotations

import random
import tomllib
from dataclasses import dataclass
from typing import Any

from ipufs.daemon import faults
from ipufs.daemon.faults import Fault, FaultError
from ipufs.daemon.fields import I64_MAX, Fraction, Integer, Invalid, Limits, Seconds, unknown
from ipufs.daemon.nesting import TooDeep, check_toml

SEED = Integer("seed", "the seed of every probability", default=0, lo=-I64_MAX - 1, hi=I64_MAX)
AFTER = Integer("after", "at the IPU's Nth access", optional=True, lo=1, hi=I64_MAX)
EVERY = Integer("every", "at every Nth access", optional=True, lo=1, hi=I64_MAX)
AT = Seconds("at", "seconds after the plan starts", optional=True)
PROBABILITY = Fraction("probability", "at each access with this probability", optional=True)
TIMES = Integer("times", "fires at most this often", optional=True, lo=1, hi=I64_MAX)
TRIGGERS = (AFTER, EVERY, AT, PROBABILITY)
#: The keys of a [[fault]] table that are not the fault's own.
PLAN_KEYS = frozenset(f.name for f in (*TRIGGERS, TIMES))


@dataclass
class Entry:
    fault: Fault
    after: int | None
    every: int | None
    at: float | None
    probability: float | None
    times: int | None  # fires at most this often (None: no limit)
    rng: random.Random
    fired: int = 0

    def spent(self) -> bool:
        return self.times is not None and self.fired >= self.times


def _trigger(raw: dict[str, Any]) -> tuple[int | None, int | None, float | None, float | None, int | None]:
    given = [f for f in TRIGGERS if f.name in raw]
    if len(given) != 1:
        raise FaultError("each fault needs exactly one of after, every, at, probability")
    try:
        after = AFTER.check(raw["after"]) if "after" in raw else None
        every = EVERY.check(raw["every"]) if "every" in raw else None
        at = AT.check(raw["at"]) if "at" in raw else None
        p = PROBABILITY.check(raw["probability"]) if "probability" in raw else None
        once = after is not None or at is not None
        times = TIMES.check(raw["times"]) if "times" in raw else (1 if once else None)
    except Invalid as exc:
        raise FaultError(str(exc)) from None
    return after, every, at, p, times


class FaultPlan:
    def __init__(self, seed: int, entries: list[Entry]) -> None:
        self.seed = seed
        self.entries = entries
        self.accesses: dict[int, int] = {}
        #: (IPU, its access number or -1 for a timed fault, the fault) as fired
        self.log: list[tuple[int, int, str]] = []

    @classmethod
    def parse(cls, text: str, limits: Limits) -> FaultPlan:
        """A plan from its TOML text; raises FaultError naming what is wrong
        (the fault's place in the plan and its key)."""
        try:
            check_toml(text)
            data = tomllib.loads(text)
        except TooDeep as exc:
            raise FaultError(str(exc)) from None
        except tomllib.TOMLDecodeError as exc:
            raise FaultError(f"not TOML: {exc}") from None
        for key in data:
            if key not in ("seed", "fault"):
                raise FaultError(unknown(key, ["seed", "fault"], "a plan", "has no key or table"))
        try:
            seed = SEED.check(data.get("seed", 0))
        except Invalid as exc:
            raise FaultError(str(exc)) from None
        raw_faults = data.get("fault", [])
        if not isinstance(raw_faults, list) or not all(isinstance(r, dict) for r in raw_faults):
            raise FaultError("fault must be tables: write each as [[fault]]")
        entries = []
        for index, raw in enumerate(raw_faults):
            try:
                fault = faults.parse(raw, limits, ignore=PLAN_KEYS)
                trigger = _trigger(raw)
            except FaultError as exc:
                raise FaultError(f"fault {index + 1}: {exc}") from None
            entries.append(Entry(fault, *trigger, rng=random.Random(f"{seed}:{index}")))
        return cls(seed, entries)

    def access(self, ipu: int) -> list[Fault]:
        """Count one access to ``ipu``; the faults that fire on it."""
        count = self.accesses.get(ipu, 0) + 1
        self.accesses[ipu] = count
        due = []
        for entry in self.entries:
            if entry.fault.ipu != ipu or entry.at is not None or entry.spent():
                continue
            if entry.after is not None:
                fire = count == entry.after
            elif entry.every is not None:
                fire = count % entry.every == 0
            else:
                fire = entry.rng.random() < (entry.probability or 0.0)
            if fire:
                entry.fired += 1
                self.log.append((ipu, count, entry.fault.describe()))
                due.append(entry.fault)
        return due

    def timed(self) -> list[Entry]:
        return [e for e in self.entries if e.at is not None]

    def fire_timed(self, entry: Entry) -> Fault | None:
        if entry.spent():
            return None
        entry.fired += 1
        self.log.append((entry.fault.ipu, -1, entry.fault.describe()))
        return entry.fault
