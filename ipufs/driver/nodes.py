# The node tree: for every IPU N the four nodes the real driver publishes,
# ipuN, ipuN_ex, ipuN_mailbox and ipuN_mem, in one root directory, and
# beside them `sys`, the sysfs view (ipufs/driver/sysfs.py): directories,
# attribute files and links, fixed once the tree is built. Inode numbers
# of the nodes are arithmetic, so that looking one up allocates nothing:
# 2 + 4 N + the node's kind. The view's start at 2**32, so that a regular
# file below that number is a node: the compatibility library tells nodes
# by it without asking the daemon (docs/compat.md).
from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ipufs.abi import nodes as abi_nodes
from ipufs.model.profile import Region

ROOT_INO = 1
_FIRST_INO = 2
#: The first inode number of the view's entries.
VIEW_FIRST_INO = 1 << 32

#: Node name suffix per region, in the order the driver lists them.
SUFFIXES: dict[Region, str] = {Region(region): suffix for region, suffix in abi_nodes.SUFFIXES.items()}
_REGIONS = list(SUFFIXES)
_NAME = re.compile(r"ipu(0|[1-9][0-9]*)(_ex|_mailbox|_mem)?")
#: The major device number the nodes are reported under where they pass
#: for character devices (the compatibility library's stat): 240 is in
#: Linux's range for local use (Documentation/admin-guide/devices.txt).
CHAR_MAJOR = 240


@dataclass
class Ownership:
    """Owner, group and permission bits of the device nodes (the root
    directory and the sysfs view are root's)."""

    uid: int = 0
    gid: int = 0
    mode: int = 0o660


@dataclass(frozen=True, slots=True)
class Node:
    ino: int
    ipu: int
    region: Region

    @property
    def name(self) -> str:
        return f"ipu{self.ipu}{SUFFIXES[self.region]}"

    @property
    def rdev(self) -> int:
        """The device number this node has as a character device: major
        CHAR_MAJOR, minor 4 N + (0 ipuN, 1 _ex, 2 _mailbox, 3 _mem)."""
        return os.makedev(CHAR_MAJOR, self.ipu * len(_REGIONS) + _REGIONS.index(self.region))


class Kind(enum.Enum):
    DIRECTORY = "directory"
    ATTRIBUTE = "attribute"  # a read-only file whose content is made at each read
    LINK = "link"


@dataclass(slots=True)
class Entry:
    """A directory, attribute file or link of the view."""

    ino: int
    parent: int
    name: str
    kind: Kind
    ipu: int = -1  # the IPU an attribute describes
    table: str = ""  # which attribute table ``name`` is looked up in
    target: str = ""  # a link's target
    children: dict[str, int] | None = None  # a directory's, in listing order


class NodeTree:
    """The nodes of ``count`` IPUs, and the directories beside them."""

    def __init__(self, count: int) -> None:
        if count < 0:
            raise ValueError("IPU count must not be negative")
        self.count = count
        self._entries: list[Entry] = []
        #: Names in the root besides the nodes -> inode.
        self.root_children: dict[str, int] = {}

    def __len__(self) -> int:
        """The number of device nodes."""
        return self.count * len(_REGIONS)

    # --- device nodes --------------------------------------------------------
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
        """The device nodes, in the driver's order."""
        for index in range(len(self)):
            node = self.by_ino(_FIRST_INO + index)
            assert node is not None
            yield node

    # --- directories and the rest --------------------------------------------
    def add(self, parent: int, name: str, kind: Kind, **details: object) -> Entry:
        """Add an entry under directory ``parent`` (ROOT_INO or an entry's)."""
        entry = Entry(VIEW_FIRST_INO + len(self._entries), parent, name, kind,
                      **details)  # type: ignore[arg-type]
        if kind is Kind.DIRECTORY:
            entry.children = {}
        siblings = self.root_children if parent == ROOT_INO else self.entry(parent).children
        if siblings is None:
            raise ValueError(f"entry {parent} is not a directory")
        if name in siblings or (parent == ROOT_INO and self.by_name(name) is not None):
            raise ValueError(f"{name!r} exists already")
        siblings[name] = entry.ino
        self._entries.append(entry)
        return entry

    def entry(self, ino: int) -> Entry:
        """The view's entry ``ino``; KeyError when there is none."""
        index = ino - VIEW_FIRST_INO
        if not 0 <= index < len(self._entries):
            raise KeyError(ino)
        return self._entries[index]

    def is_entry(self, ino: int) -> bool:
        return 0 <= ino - VIEW_FIRST_INO < len(self._entries)

    def entries(self) -> Iterator[Entry]:
        return iter(self._entries)

    def lookup(self, parent: int, name: str) -> int | None:
        """The inode called ``name`` in directory ``parent``, or None."""
        if parent == ROOT_INO:
            node = self.by_name(name)
            return node.ino if node is not None else self.root_children.get(name)
        children = self.entry(parent).children
        return None if children is None else children.get(name)

    def is_directory(self, ino: int) -> bool:
        return ino == ROOT_INO or (self.is_entry(ino) and self.entry(ino).kind is Kind.DIRECTORY)

    def parent_of(self, ino: int) -> int:
        return ROOT_INO if ino == ROOT_INO else self.entry(ino).parent
