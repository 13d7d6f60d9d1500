# Which IPUs to give a container that asks for N of them (the answer to
# GetPreferredAllocation). Only a multi-IPU group can sync together (GS2),
# and the groups are those `ipufs ls` lists: aligned runs of 2, 4, ... IPUs
# of one board. So a request of a group's size gets a whole free group,
# and among those the one that breaks the fewest larger free groups (a
# buddy allocator's best fit), so that later requests still find whole
# groups. Where no free group fits (an odd size, a fragmented node, devices
# kubelet insists on), IPUs are taken as close together as the groups allow.
from __future__ import annotations

from collections.abc import Collection, Sequence


class PlacementError(ValueError):
    """The request cannot be met; the message says why."""


def _tightness(group: Sequence[int], groups: Sequence[Sequence[int]], free: set[int]) -> int:
    """How many wholly free groups strictly larger than ``group`` contain it."""
    members = set(group)
    return sum(1 for g in groups if len(g) > len(members) and members < set(g) and set(g) <= free)


def _distance(ipu: int, chosen: Collection[int], groups: Sequence[Sequence[int]]) -> float:
    """The size of the smallest group holding ``ipu`` and a chosen IPU."""
    if not chosen:
        return 0
    sizes = [len(g) for g in groups if ipu in g and any(c in g for c in chosen)]
    return min(sizes, default=float("inf"))


def _fit_for(ipu: int, size: int, groups: Sequence[Sequence[int]], free: set[int]) -> tuple[int, float, int]:
    """For a first pick: the smallest group around ``ipu`` with room for
    ``size`` free IPUs (its size, then how many are free: fewer is tighter);
    where none has room, the group around it with the most free IPUs."""
    around = [(len(g), len(free & set(g))) for g in groups if ipu in g]
    room = sorted((n, f) for n, f in around if f >= size)
    if room:
        return (0, *room[0])
    return (1, -max((f for _, f in around), default=1), 0)


def preferred(available: Sequence[int], must_include: Sequence[int], size: int,
              groups: Sequence[Sequence[int]]) -> list[int]:
    """``size`` IPUs out of ``available`` (with ``must_include`` among them),
    best placed for sync; ``groups`` are the node's multi-IPU groups."""
    free = set(available)
    must = set(must_include)
    if not must <= free:  # kubelet's contract: what must be included is available
        missing = ", ".join(map(str, sorted(must - free)))
        raise PlacementError(f"IPU {missing} must be included but is not among the available devices")
    if size <= 0:
        raise PlacementError(f"allocation size must be positive, not {size}")
    if size > len(free):
        raise PlacementError(f"asked for {size} IPUs, but only {len(free)} are available")
    if len(must) > size:
        raise PlacementError(f"{len(must)} IPUs must be included in an allocation of {size}")
    if len(must) == size:
        return sorted(must)
    if size == 1:
        candidates: list[Sequence[int]] = [(i,) for i in sorted(free)]
    else:
        candidates = [g for g in groups if len(g) == size and set(g) <= free and must <= set(g)]
    if candidates:
        best = min(candidates, key=lambda g: (_tightness(g, groups, free), sorted(g)))
        return sorted(best)
    chosen = sorted(must)
    while len(chosen) < size:
        rest = [i for i in sorted(free) if i not in chosen]
        if chosen:
            pick = min(rest, key=lambda i: (_distance(i, chosen, groups), i))
        else:
            pick = min(rest, key=lambda i: (*_fit_for(i, size, groups, free), i))
        chosen.append(pick)
    return sorted(chosen)
