# The ICU mailbox node of one IPU, used through its rings (docs/icu.md):
# requests go into the request ring and the doorbell is rung; answers are
# taken from the response ring when poll says the node is readable.
from __future__ import annotations

import mmap
import os
import select
import struct
from pathlib import Path

from ipufs.abi import icu
from ipufs.abi.icu import Header
from ipufs.abi.nodes import node_name
from ipufs.client.bars import bar_size
from ipufs.client.where import default_root

_U32 = struct.Struct("<I")


class Mailbox:
    def __init__(self, index: int = 0, root: str | os.PathLike[str] | None = None) -> None:
        """``root``: the nodes' directory (default $IPUFS_MOUNT, else /dev)."""
        base = Path(default_root() if root is None else root)
        self.fd = os.open(base / node_name(index, "mailbox"), os.O_RDWR | os.O_CLOEXEC)
        self.map = mmap.mmap(self.fd, bar_size(self.fd), mmap.MAP_SHARED)
        if self._get(Header.MAGIC) != icu.MAGIC:
            raise OSError(f"ipu{index}_mailbox has no ICU mailbox layout")

    def fileno(self) -> int:
        return self.fd

    def _get(self, field: Header) -> int:
        return int(_U32.unpack_from(self.map, field)[0])

    def _put(self, field: Header, value: int) -> None:
        _U32.pack_into(self.map, field, value & 0xFFFFFFFF)

    def post(self, request: tuple[int, ...]) -> None:
        """Put a request in the request ring (without ringing)."""
        head = self._get(Header.REQUEST_HEAD)
        slot = self._get(Header.REQUEST_OFFSET) + (head % self._get(Header.REQUEST_SLOTS)) * icu.SLOT_SIZE
        icu.MESSAGE.pack_into(self.map, slot, *request)
        self._put(Header.REQUEST_HEAD, head + 1)

    def ring(self, *, mapped: bool = False) -> None:
        """Ring the doorbell: by pwrite (served before this returns) or by a
        store through the mapping (picked up by the register watcher)."""
        if mapped:
            self._put(Header.DOORBELL, 1)
        else:
            os.pwrite(self.fd, _U32.pack(1), Header.DOORBELL)

    def wait(self, timeout: float) -> bool:
        """Wait until an answer is waiting (poll on the node)."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))

    def take(self) -> tuple[int, ...] | None:
        """The next answer from the response ring, or None."""
        tail = self._get(Header.RESPONSE_TAIL)
        if tail == self._get(Header.RESPONSE_HEAD):
            return None
        slot = self._get(Header.RESPONSE_OFFSET) + (tail % self._get(Header.RESPONSE_SLOTS)) * icu.SLOT_SIZE
        message = icu.MESSAGE.unpack_from(self.map, slot)
        self._put(Header.RESPONSE_TAIL, tail + 1)
        return message

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)

    def __enter__(self) -> Mailbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
