# Files a user names for ipufs to read whole: the configuration file
# (--config) and fault plans (fault_plan, `ipufs inject plan`). Each must
# be a regular file of at most MAX_BYTES: /dev/zero would be read until
# memory runs out, and a FIFO would hold the daemon at its start until a
# writer came. The file is opened without waiting (O_NONBLOCK: a FIFO
# opens at once) and judged by what was opened, not by its name, so it
# cannot be swapped between a look and the read.
from __future__ import annotations

import errno
import os
import stat

#: The most a configuration file or a fault plan may hold (a plan of
#: thousands of faults is well under it).
MAX_BYTES = 1 << 20

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _size(n: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


class FileRefused(ValueError):
    """A file named to be read is not a regular file, or is larger than
    the limit; the message, one line, names it and says why."""


def read(path: str | os.PathLike[str], limit: int = MAX_BYTES) -> bytes:
    """The contents of the regular file ``path``: FileRefused when it is
    something else or holds more than ``limit`` bytes; OSError (such as
    FileNotFoundError) when it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (no file to read)
            raise FileRefused(f"{os.fspath(path)}: not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise FileRefused(f"{os.fspath(path)}: not a regular file ({kind})")
        chunks, size = [], 0
        while size <= limit:  # st_size may be 0 (/proc) or grow meanwhile: read, then count
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileRefused(f"{os.fspath(path)}: larger than {_size(limit)}, the most it may hold")
        return b"".join(chunks)
    finally:
        os.close(fd)
