# Reading a file a tool was given, safely: only a regular file (a FIFO
# would block the reader forever, /dev/zero would never end), and no more
# than a limit the caller names (a tile program is small), each refusal one
# line that names the file and why.
from __future__ import annotations

import os
import stat
from pathlib import Path

MiB = 1 << 20
#: The most a tool reads of an input that is not a memory image: an ELF
#: file (symbols and debug sections besides its code) or assembler source.
MAX_INPUT = 64 * MiB

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}


def read_input(path: str | os.PathLike[str], limit: int = MAX_INPUT) -> bytes:
    """The bytes of the regular file ``path``; ValueError (one line) for
    anything else, or for a file of more than ``limit`` bytes."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer before fstat says what it is.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path}: not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'a special file')})")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(MiB, limit + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ValueError(f"{path}: more than {limit:,} bytes, more than an input here may have")
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = MAX_INPUT) -> str:
    """The text of the regular file ``path`` (UTF-8); ValueError otherwise."""
    try:
        return read_input(path, limit).decode()
    except UnicodeDecodeError:
        raise ValueError(f"{Path(path)}: not a text file") from None
