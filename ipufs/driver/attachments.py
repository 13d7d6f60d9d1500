# Which process is attached to which IPU. An attachment is taken by ATTACH
# for the thread group of the calling thread (from the FUSE header, never
# from an argument), holds a pidfd taken at that moment so that a recycled
# pid is never signalled, and ends when the process closes its last file
# of that IPU or dies.
from __future__ import annotations

import time
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
    secondary_ipu_id: int | None = None  # SET_SECONDARY_IPU_ID's (None: never set)
    handles: set[int] = field(default_factory=set)  # file handles keeping it
    buffers: dict[int, Buffer] = field(default_factory=dict)
    next_buffer_id: int = 1
    attached_at: float = field(default_factory=time.monotonic)


class AttachmentTable:
    def __init__(self) -> None:
        self.by_ipu: dict[int, Attachment] = {}
        #: (start, end) of the last attachment of each IPU that has ended
        #: (its session, as `ipu utilisation (session)` reports it)
        self.last_session: dict[int, tuple[float, float]] = {}

    def get(self, ipu: int) -> Attachment | None:
        return self.by_ipu.get(ipu)

    def add(self, attachment: Attachment) -> None:
        assert attachment.ipu not in self.by_ipu
        self.by_ipu[attachment.ipu] = attachment

    def remove(self, ipu: int) -> Attachment | None:
        attachment = self.by_ipu.pop(ipu, None)
        if attachment is not None:
            self.last_session[ipu] = (attachment.attached_at, time.monotonic())
        return attachment

    def session(self, ipu: int) -> tuple[float, float | None] | None:
        """The monotonic times the current attachment of ``ipu`` began (and
        None: it goes on), else the last one's start and end; None when
        the IPU was never attached."""
        current = self.by_ipu.get(ipu)
        if current is not None:
            return current.attached_at, None
        return self.last_session.get(ipu)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self.by_ipu.values()))

    def __len__(self) -> int:
        return len(self.by_ipu)
