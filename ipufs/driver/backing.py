# The memory behind a BAR: a sealed memfd (or a file in a state directory),
# sized by the profile, mapped once by the daemon. Its fd is what FUSE
# passthrough registers, so a client's mmap maps these very pages.
from __future__ import annotations

import errno
import fcntl
import mmap
import os
from pathlib import Path

#: A clear that finds at most this many runs of pages holding data drops
#: each run by itself; one that finds more drops everything from the first
#: run to the end in one call. A call's cost has a fixed part that grows
#: with the page tables the range crosses in every mapping of the file
#: (about a millisecond over an ipu2 exchange BAR whose tiles all ran), so
#: few runs are cheaper one by one (docs/executor-speed.md, "A reset").
DISCARD_RUNS = 32


class BackingFile:
    """A fixed-size shared memory file. memfds are sealed against growing
    and shrinking, so no write through any path can change the size; they
    are sparse, so untouched BARs cost no memory."""

    def __init__(self, fd: int, size: int, *, sealed: bool, path: Path | None = None) -> None:
        self.fd = fd
        self.size = size
        self.sealed = sealed
        self.path = path
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    @classmethod
    def memfd(cls, name: str, size: int) -> BackingFile:
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(
                fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
            )
            return cls(fd, size, sealed=True)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def file(cls, path: Path, size: int) -> BackingFile:
        """A file that outlives the daemon (``--state-dir``); created sparse
        when missing, refused when it exists with another size."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            current = os.fstat(fd).st_size
            if current == 0:
                os.ftruncate(fd, size)
            elif current != size:
                raise ValueError(f"{path} holds {current} bytes, the profile needs {size}")
            return cls(fd, size, sealed=False, path=path)
        except BaseException:
            os.close(fd)
            raise

    def blocks(self) -> int:
        """512-byte blocks the file really holds (st_blocks of the memfd or
        file): untouched pages of a sparse BAR hold none. One fstat."""
        return os.fstat(self.fd).st_blocks if self.fd >= 0 else 0

    def data_runs(self, offset: int, end: int, limit: int) -> tuple[list[tuple[int, int]], bool]:
        """The first ``limit`` runs of pages in [``offset``, ``end``) that
        hold data, as (start, end) pairs on page boundaries within the
        range, and whether they are all (SEEK_DATA and SEEK_HOLE: two system
        calls a run, whatever the range's size). A file system that cannot
        tell holes reports the whole range as one run."""
        runs: list[tuple[int, int]] = []
        at = offset
        while at < end:
            try:
                start = os.lseek(self.fd, at, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data at or after ``at``
                    break
                raise
            if start >= end:
                break
            if len(runs) == limit:
                return runs, False
            stop = os.lseek(self.fd, start, os.SEEK_HOLE)
            start -= start % mmap.PAGESIZE  # blocks smaller than a page
            stop = min(end, -(-stop // mmap.PAGESIZE) * mmap.PAGESIZE)
            runs.append((start, stop))
            at = stop
        return runs, True

    def discard(self, offset: int = 0, length: int | None = None) -> None:
        """Zero the file (or ``length`` bytes at ``offset``, whole pages) by
        dropping its pages (MADV_REMOVE punches a hole in shmem and in most
        filesystems), so a reset of a large BAR costs no memory; where that
        is refused, store zeros. Only pages that hold data are dropped: none,
        no call at all; up to DISCARD_RUNS runs of them, a call per run;
        more, one call from the first to the end. A page written while this
        runs races the reset and may keep its data; one written before it
        began is always found."""
        end = self.size if length is None else offset + length
        try:
            runs, complete = self.data_runs(offset, end, DISCARD_RUNS)
        except OSError:  # the file system cannot say: everything
            runs, complete = [(offset, end)], True
        if not complete:
            runs = [(runs[0][0], end)]
        for start, stop in runs:
            self._drop(start, stop)

    def _drop(self, start: int, end: int) -> None:
        try:
            self.map.madvise(mmap.MADV_REMOVE, start, end - start)
        except OSError:
            chunk = bytes(1 << 20)
            for at in range(start, end, len(chunk)):
                n = min(len(chunk), end - at)
                self.map[at : at + n] = chunk[:n]

    def close(self) -> None:
        if self.fd >= 0:
            try:
                self.map.close()
            except BufferError:
                pass  # a numpy view still holds it; the pages go with the process
            os.close(self.fd)
            self.fd = -1
