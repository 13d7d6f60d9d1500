# The emulated IPUs of one mount: a model Ipu per device, each region backed
# by a BackingFile (a sealed memfd, or a file under --state-dir).
from __future__ import annotations

from pathlib import Path

from ipufs.driver.backing import BackingFile
from ipufs.model.ipu import Ipu
from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile, Region


class DeviceSet:
    """``count`` IPUs of ``profile``."""

    def __init__(self, profile: Profile, count: int, *, state_dir: Path | None = None) -> None:
        self.profile = profile
        self.state_dir = state_dir
        self.backing: dict[tuple[int, Region], BackingFile] = {}
        self.ipus: list[Ipu] = []
        try:
            for index in range(count):
                memory = {}
                for region in Region:
                    size = profile.region_size(region)
                    if state_dir is None:
                        bf = BackingFile.memfd(f"ipufs-ipu{index}-{region.value}", size)
                    else:
                        bf = BackingFile.file(state_dir / f"ipu{index}.{region.value}", size)
                    self.backing[index, region] = bf
                    memory[region] = BarMemory(memoryview(bf.map))
                self.ipus.append(Ipu(profile, index, memory))
        except BaseException:
            self.close()
            raise

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
