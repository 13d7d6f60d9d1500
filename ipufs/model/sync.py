# Global syncs. Zone numbers follow the IPU's sync zones (docs/sync zones.md
# of the public research repository, github.com/Saghetti0/graphcore-ipu-research): external
# zones 4..7 are the slave side and 12..15 the master side of GS1 (4/12),
# GS1H (5/13), GS2 (6/14) and GS2H (7/15). ipufs's semantics, documented in
# docs/registers.md: a GS1 sync completes on the requesting IPU at once; a
# GS2 sync is a barrier over the IPU's group (its board, or a configured
# group) and completes for every member when the last one arrives. On
# completion each member raises the interrupt of its own side: slave zones
# GS1 E0 / GS2 E0, master zones GS1 E1 / GS2 E1 (signals 46..49).
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import SYNC_ERROR, SYNC_WAITING


class Zone(enum.IntEnum):
    RECV = 0
    ANS = 1
    LOCAL = 2
    INTERNAL = 3
    GS1 = 4
    GS1H = 5
    GS2 = 6
    GS2H = 7
    GS1_MSR = 12
    GS1H_MSR = 13
    GS2_MSR = 14
    GS2H_MSR = 15


HOST_ZONES = frozenset({Zone.GS1, Zone.GS1H, Zone.GS2, Zone.GS2H,
                        Zone.GS1_MSR, Zone.GS1H_MSR, Zone.GS2_MSR, Zone.GS2H_MSR})


def is_master(zone: int) -> bool:
    return zone >= 12


def is_global2(zone: int) -> bool:
    return zone & 7 in (Zone.GS2, Zone.GS2H)


def interrupt_for(zone: int) -> Interrupt:
    if is_global2(zone):
        return Interrupt.GS2_E1 if is_master(zone) else Interrupt.GS2_E0
    return Interrupt.GS1_E1 if is_master(zone) else Interrupt.GS1_E0


class SyncRefused(Exception):
    """A request for a zone the host cannot sync on, or made while this IPU
    still waits for its group."""


@dataclass
class SyncGroup:
    """The IPUs that take part in GS2 together. ``complete(member, zone)``
    is called for each member when a barrier completes."""

    members: tuple[int, ...]
    complete: Callable[[int, int], None]
    #: barrier key (GS2 or GS2H) -> member -> the zone it asked for
    waiting: dict[int, dict[int, int]] = field(default_factory=dict)

    def arrive(self, member: int, zone: int) -> bool:
        """``member`` requests ``zone``; returns True when it must wait."""
        if zone not in HOST_ZONES:
            raise SyncRefused(f"zone {zone} is not a host sync zone")
        if self.is_waiting(member):
            raise SyncRefused(f"IPU {member} already waits for its group")
        if not is_global2(zone):
            self.complete(member, zone)
            return False
        key = zone & 7
        arrived = self.waiting.setdefault(key, {})
        arrived[member] = zone
        if len(arrived) < len(self.members):
            return True
        del self.waiting[key]
        for m, z in sorted(arrived.items()):
            self.complete(m, z)
        return False

    def is_waiting(self, member: int) -> bool:
        return any(member in arrived for arrived in self.waiting.values())

    def withdraw(self, member: int) -> None:
        """``member`` was reset: it no longer waits."""
        for arrived in self.waiting.values():
            arrived.pop(member, None)


class HostSync:
    """One IPU's side of the host syncs: what SYNC_STATUS and the sync
    counters show, and its requests of its ``group`` as member ``index``."""

    def __init__(self, index: int, group: SyncGroup) -> None:
        self.index = index
        self.group = group
        #: SYNC_STATUS: SYNC_WAITING, SYNC_ERROR, the zone last completed in bits 8..15
        self.status = 0
        #: completed syncs: 1 (GS1, GS1H), 2 (GS2, GS2H)
        self.counts = {1: 0, 2: 0}

    def request(self, zone: int) -> bool:
        """Ask the group for a sync on ``zone``; False if it is refused."""
        self.status &= ~SYNC_ERROR
        try:
            waits = self.group.arrive(self.index, zone)
        except SyncRefused:
            self.status |= SYNC_ERROR
            return False
        if waits:
            self.status |= SYNC_WAITING
        return True

    def completed(self, zone: int) -> None:
        """A sync this IPU asked for completed."""
        self.status = (self.status & ~(SYNC_WAITING | 0xFF00)) | (zone & 0xFF) << 8
        self.counts[2 if is_global2(zone) else 1] += 1

    def withdraw(self) -> None:
        """Reset: no sync waits."""
        self.group.withdraw(self.index)
        self.status = 0
