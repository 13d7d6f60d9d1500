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
from __future__ import annotations

import random
import tomllib
from dataclasses import dataclass
from typing import Any

from ipufs.daemon import faults
from ipufs.daemon.faults import Fault, FaultError


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
    after, every, at, p = raw.get("after"), raw.get("every"), raw.get("at"), raw.get("probability")
    given = [x for x in (after, every, at, p) if x is not None]
    if len(given) != 1:
        raise FaultError("each fault needs exactly one of after, every, at, probability")
    if after is not None and (not isinstance(after, int) or after < 1):
        raise FaultError("after must be a count of 1 or more")
    if every is not None and (not isinstance(every, int) or every < 1):
        raise FaultError("every must be a count of 1 or more")
    if at is not None and (not isinstance(at, (int, float)) or at < 0):
        raise FaultError("at must be seconds, 0 or more")
    if p is not None and (not isinstance(p, (int, float)) or not 0 <= p <= 1):
        raise FaultError("probability must be between 0 and 1")
    times = raw.get("times", 1 if (after is not None or at is not None) else None)
    if times is not None and (not isinstance(times, int) or times < 1):
        raise FaultError("times must be a count of 1 or more")
    return after, every, (float(at) if at is not None else None), (float(p) if p is not None else None), times


class FaultPlan:
    def __init__(self, seed: int, entries: list[Entry]) -> None:
        self.seed = seed
        self.entries = entries
        self.accesses: dict[int, int] = {}
        #: (IPU, its access number or -1 for a timed fault, the fault) as fired
        self.log: list[tuple[int, int, str]] = []

    @classmethod
    def parse(cls, text: str, ipus: int) -> FaultPlan:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise FaultError(f"not TOML: {exc}") from None
        seed = data.get("seed", 0)
        if not isinstance(seed, int):
            raise FaultError("seed must be an integer")
        entries = []
        for index, raw in enumerate(data.get("fault", [])):
            try:
                fault = faults.parse(raw, ipus)
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
