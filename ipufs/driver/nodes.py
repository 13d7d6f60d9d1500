# The fixed node tree the real driver publishes: for every IPU N the four
# nodes ipuN, ipuN_ex, ipuN_mailbox and ipuN_mem, under one root directory.
# Inode numbers are arithmetic, so lookups allocate nothing.
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ipufs.model.profile import Region

ROOT_INO = 1
_FIRST_INO = 2

#: Node name suffix per region, in the order the driver lists them.
SUFFIXES: dict[Region, str] = {
    Region.CONFIG: "",
    Region.EXCHANGE: "_ex",
    Region.MAILBOX: "_mailbox",
    Region.HOST_MEMORY: "_mem",
}
_REGIONS = list(SUFFIXES)
_NAME = re.compile(r"ipu(0|[1-9][0-9]*)(_ex|_mailbox|_mem)?")


@dataclass(frozen=True, slots=True)
class Node:
    ino: int
    ipu: int
    region: Region

    @property
    def name(self) -> str:
        return f"ipu{self.ipu}{SUFFIXES[self.region]}"


class NodeTree:
    """The nodes of ``count`` IPUs."""

    def __init__(self, count: int) -> None:
        if count < 0:
            raise ValueError("IPU count must not be negative")
        self.count = count

    def __len__(self) -> int:
        return self.count * len(_REGIONS)

    def by_ino(self, ino: int) -> Node | None:
        index = ino - _FIRST_INO
        if not 0 <= index < len(self):
            return None
        ipu, r = divmod(index, len(_REGIONS))
        return Node(ino, ipu, _REGIONS[r])

    def by_name(self, name: str) -> Node | None:
        m = _NAME.fullmatch(name)
        if m is None:
            return None
        ipu = int(m.group(1))
        if ipu >= self.count:
            return None
        return self.node(ipu, _REGIONS[[*SUFFIXES.values()].index(m.group(2) or "")])

    def node(self, ipu: int, region: Region) -> Node:
        return Node(_FIRST_INO + ipu * len(_REGIONS) + _REGIONS.index(region), ipu, region)

    def __iter__(self) -> Iterator[Node]:
        for index in range(len(self)):
            node = self.by_ino(_FIRST_INO + index)
            assert node is not None
            yield node
