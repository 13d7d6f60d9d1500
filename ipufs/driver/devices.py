# The emulated IPUs of one mount: a model Ipu per device, each region backed
# by a BackingFile (a sealed memfd, or a file under --state-dir), grouped
# into boards that take part in GS2 syncs together.
from __future__ import annotations

from pathlib import Path

from ipufs.abi.serial import board_serial
from ipufs.driver.backing import BackingFile
from ipufs.driver.events import EventSink, IcuExchange
from ipufs.model.icu import IcuObserver
from ipufs.model.ipu import Ipu, Placement
from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile, Region
from ipufs.model.sync import SyncGroup


class DeviceSet:
    """``count`` IPUs of ``profile``, in groups of ``group_size`` (default:
    the profile's IPUs per board; a last, short group holds the rest).
    ICU requests and answers are told to ``events`` (the trace)."""

    def __init__(
        self,
        profile: Profile,
        count: int,
        *,
        state_dir: Path | None = None,
        group_size: int | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.profile = profile
        self.state_dir = state_dir
        self.group_size = group_size or profile.ipus_per_board
        if self.group_size < 1:
            raise ValueError("a group holds at least one IPU")
        self.backing: dict[tuple[int, Region], BackingFile] = {}
        self.ipus: list[Ipu] = []
        self.groups: list[SyncGroup] = []
        #: The IPUs whose interrupt controllers have signals to deliver
        #: (each controller's outbox).
        self.deliverable: set[int] = set()
        try:
            for first in range(0, count, self.group_size):
                members = tuple(range(first, min(first + self.group_size, count)))
                group = SyncGroup(members, self._completed)
                self.groups.append(group)
                for index in members:
                    placement = Placement(board=first // self.group_size, index_on_board=index - first,
                                          serial=board_serial(profile.board_type, first // self.group_size),
                                          group_size=len(members))
                    self.ipus.append(Ipu(profile, index, self._memory(index), placement=placement, group=group,
                                         outbox=self.deliverable,
                                         icu_observer=None if events is None else _icu_events(events, index)))
        except BaseException:
            self.close()
            raise

    def _memory(self, index: int) -> dict[Region, BarMemory]:
        memory = {}
        for region in Region:
            size = self.profile.region_size(region)
            if self.state_dir is None:
                bf = BackingFile.memfd(f"ipufs-ipu{index}-{region.value}", size)
            else:
                bf = BackingFile.file(self.state_dir / f"ipu{index}.{region.value}", size)
            self.backing[index, region] = bf
            memory[region] = BarMemory(memoryview(bf.map), discard=bf.discard)
        return memory

    def _completed(self, member: int, zone: int) -> None:
        self.ipus[member].sync_completed(zone)

    @property
    def persistent(self) -> bool:
        return self.state_dir is not None

    def __len__(self) -> int:
        return len(self.ipus)

    def track_dirty(self, enabled: bool) -> None:
        for ipu in self.ipus:
            for memory in ipu.memory.values():
                memory.track_dirty = enabled

    def close(self) -> None:
        self.ipus.clear()
        for bf in self.backing.values():
            bf.close()
        self.backing.clear()


def _icu_events(events: EventSink, index: int) -> IcuObserver:
    def observe(request: tuple[int, ...], answer: tuple[int, ...] | None) -> None:
        if events.enabled:
            events.emit(IcuExchange(index, request, answer))

    return observe
