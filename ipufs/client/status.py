# A read-only look at an IPU's status registers through a shared mapping
# of its config space (docs/registers.md, block STATUS). Loads from the
# mapping never reach the daemon, so a watcher that reads them as often as
# it likes adds no FUSE request, no trace event and no fault-plan access;
# the daemon stores every status change into the BAR as it happens.
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from ipufs.client.bars import bar_size
from ipufs.abi.registers import (
    REGISTERS,
    STATUS_EXCEPTION,
    STATUS_ICU_UNRESPONSIVE,
    STATUS_LINK_DOWN,
    STATUS_READY,
    ExceptionCause,
)

__all__ = ["STATUS_EXCEPTION", "STATUS_ICU_UNRESPONSIVE", "STATUS_LINK_DOWN", "STATUS_READY",
           "ExceptionCause", "Status", "StatusView"]

_STATUS = REGISTERS["STATUS"].offset
_ERROR_STATE = REGISTERS["ERROR_STATE"].offset


@dataclass(frozen=True, slots=True)
class Status:
    """STATUS and ERROR_STATE as last stored by the device."""

    bits: int
    error_state: int  # the cause of the held exception, 0 when none

    @property
    def cause(self) -> str:
        """The held exception's cause by name ("none" when none is held)."""
        try:
            return ExceptionCause(self.error_state).name.lower()
        except ValueError:
            return f"cause {self.error_state}"


class StatusView:
    """``root/ipuN`` opened read-only and mapped whole (one open, which the
    daemon sees; nothing after it)."""

    def __init__(self, index: int, root: str | os.PathLike[str]) -> None:
        self.index = index
        fd = os.open(Path(root) / f"ipu{index}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._map = mmap.mmap(fd, bar_size(fd), mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)  # the mapping keeps the file

    def read(self) -> Status:
        m = self._map
        return Status(int.from_bytes(m[_STATUS:_STATUS + 4], "little"),
                      int.from_bytes(m[_ERROR_STATE:_ERROR_STATE + 4], "little"))

    def close(self) -> None:
        self._map.close()

    def __enter__(self) -> StatusView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
