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
    handles: set[int] = field(default_factory=set)  # file handles keeping it
    buffers: dict[int, Buffer] = field(default_factory=dict)
    next_buffer_id: int = 1
    attached_at: float = field(default_factory=time.monotonic)


class AttachmentTable:
    def __init__(self) -> None:
        self.by_ipu: dict[int, Attachment] = {}
        #: When the table began, and for how long each IPU was held by
        #: attachments that have ended (what `ipufs info` reports as use).
        self.started = time.monotonic()
        self.held: dict[int, float] = {}
        self.last_session: dict[int, tuple[float, float]] = {}  # ipu: (start, end) of the last ended one

    def get(self, ipu: int) -> Attachment | None:
        return self.by_ipu.get(ipu)

    def add(self, attachment: Attachment) -> None:
        assert attachment.ipu not in self.by_ipu
        self.by_ipu[attachment.ipu] = attachment

    def remove(self, ipu: int) -> Attachment | None:
        attachment = self.by_ipu.pop(ipu, None)
        if attachment is not None:
            now = time.monotonic()
            self.held[ipu] = self.held.get(ipu, 0.0) + now - attachment.attached_at
            self.last_session[ipu] = (attachment.attached_at, now)
        return attachment

    def use(self, ipu: int) -> tuple[float, float | None]:
        """The share (0..1) of the time since the table began that a process
        was attached to ``ipu``, and the share of the current (or last)
        attachment's time since it began (None: never attached)."""
        now = time.monotonic()
        current = self.by_ipu.get(ipu)
        held = self.held.get(ipu, 0.0) + (now - current.attached_at if current else 0.0)
        total = max(now - self.started, 1e-9)
        if current is not None:
            session: float | None = 1.0
        elif ipu in self.last_session:
            start, end = self.last_session[ipu]
            session = (end - start) / max(now - start, 1e-9)
        else:
            session = None
        return min(held / total, 1.0), session

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self.by_ipu.values()))

    def __len__(self) -> int:
        return len(self.by_ipu)
