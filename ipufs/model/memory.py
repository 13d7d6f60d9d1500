# One BAR's bytes as the model sees them: a numpy view of memory that the
# driver provides (the same pages a client maps). Writes made here are
# recorded as dirty ranges when asked, so that the driver can publish them
# to clients that see a copy (the page-cache mode); with passthrough the
# client maps these very pages and nothing needs publishing.
from __future__ import annotations

import mmap
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray


PAGE = 4096


def sparse_words(count: int) -> NDArray[np.uint32]:
    """``count`` u32 zeros that hold no memory until written (an anonymous
    mapping: pages read before any write are the kernel's zero page). For
    the model's large, mostly zero shadows, one per IPU."""
    private = mmap.mmap(-1, max(count, 1) * 4, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # shared would be shmem
    return np.frombuffer(private, dtype=np.uint32, count=count)


class BarMemory:
    """Bounds-checked byte access to one region."""

    def __init__(
        self,
        buffer: memoryview | bytearray | NDArray[np.uint8],
        *,
        track_dirty: bool = False,
        discard: Callable[[int, int], None] | None = None,
    ) -> None:
        self.bytes: NDArray[np.uint8] = np.frombuffer(buffer, dtype=np.uint8)
        self.words: NDArray[np.uint32] = self.bytes[: self.bytes.size // 4 * 4].view(np.uint32)
        self.track_dirty = track_dirty
        self._dirty: list[tuple[int, int]] = []
        #: Zeroes ``length`` bytes at ``offset`` (whole pages) by dropping
        #: their pages (provided by the driver, which owns the backing
        #: file); without it, clear() stores zeros, which would make a
        #: sparse BAR resident.
        self._discard = discard

    @property
    def size(self) -> int:
        return int(self.bytes.size)

    def clip(self, offset: int, length: int) -> int:
        """How many of ``length`` bytes at ``offset`` lie inside the BAR."""
        if offset < 0 or length < 0:
            raise ValueError("negative offset or length")
        return max(0, min(length, self.size - offset))

    def read(self, offset: int, length: int) -> bytes:
        n = self.clip(offset, length)
        return self.bytes[offset : offset + n].tobytes()

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Store ``data`` at ``offset``, clipped at the end; returns the
        count stored."""
        n = self.clip(offset, len(data))
        if n:
            self.bytes[offset : offset + n] = np.frombuffer(data, dtype=np.uint8, count=n)
            if self.track_dirty:
                self._dirty.append((offset, n))
        return n

    def store_word(self, index: int, value: int) -> None:
        """Store u32 ``value`` at word ``index``."""
        self.words[index] = value
        if self.track_dirty:
            self._dirty.append((index * 4, 4))

    def written(self, offset: int, length: int) -> None:
        """Bytes at ``offset`` were stored by other means (the executor's
        native loop): recorded as dirty like the stores made here."""
        if self.track_dirty:
            self._dirty.append((offset, length))

    def store_words(self, indices: NDArray[np.intp], values: NDArray[np.uint32]) -> None:
        """Store u32 ``values`` at word ``indices``, touching (and recording
        as dirty) only the words that change."""
        changed = self.words[indices] != values
        if changed.any():
            where = indices[changed]
            self.words[where] = values[changed]
            if self.track_dirty:
                self._dirty.extend((int(i) * 4, 4) for i in where)

    def clear(self, offset: int = 0, length: int | None = None) -> None:
        """All zeros (or ``length`` bytes at ``offset``, whole pages), and
        no memory held for them where the backing allows."""
        length = self.size - offset if length is None else self.clip(offset, length)
        if self._discard is not None and not (offset | length) % PAGE:
            self._discard(offset, length)
        else:
            self.bytes[offset : offset + length] = 0
        if self.track_dirty:
            self._dirty.append((offset, length))

    def take_dirty(self) -> list[tuple[int, int]]:
        """The ranges written since the last call, and forget them."""
        dirty, self._dirty = self._dirty, []
        return dirty
