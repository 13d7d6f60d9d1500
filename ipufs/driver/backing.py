# The memory behind a BAR: a sealed memfd (or a file in a state directory),
# sized by the profile, mapped once by the daemon. Its fd is what FUSE
# passthrough registers, so a client's mmap maps these very pages.
from __future__ import annotations

import fcntl
import mmap
import os
from pathlib import Path


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

    def discard(self, offset: int = 0, length: int | None = None) -> None:
        """Zero the file (or ``length`` bytes at ``offset``, whole pages) by
        dropping its pages (MADV_REMOVE punches a hole in shmem and in most
        filesystems), so a reset of a large BAR costs no memory; where that
        is refused, store zeros."""
        end = self.size if length is None else offset + length
        try:
            self.map.madvise(mmap.MADV_REMOVE, offset, end - offset)
        except OSError:
            chunk = bytes(1 << 20)
            for at in range(offset, end, len(chunk)):
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
