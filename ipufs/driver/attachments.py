# Which process is attached to which IPU. An attachment is taken by ATTACH
# for the thread group of the calling thread (from the FUSE header, never
# from an argument), holds a pidfd taken at that moment so that a recycled
# pid is never signalled, and ends when the process closes its last file
# of that IPU or dies.
from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Buffer:
    id: int
    address: int
    length: int
    flags: int


@dataclass
class Attachment:
    ipu: int
    pid: int  # thread group id
    pidfd: int
    ipu_id: int  # the value of si_int
    handles: set[int] = field(default_factory=set)  # file handles keeping it
    buffers: dict[int, Buffer] = field(default_factory=dict)
    next_buffer_id: int = 1
    signals_sent: int = 0

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


class AttachmentTable:
    def __init__(self) -> None:
        self.by_ipu: dict[int, Attachment] = {}

    def get(self, ipu: int) -> Attachment | None:
        return self.by_ipu.get(ipu)

    def add(self, attachment: Attachment) -> None:
        assert attachment.ipu not in self.by_ipu
        self.by_ipu[attachment.ipu] = attachment

    def remove(self, ipu: int) -> Attachment | None:
        return self.by_ipu.pop(ipu, None)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self.by_ipu.values()))

    def __len__(self) -> int:
        return len(self.by_ipu)
