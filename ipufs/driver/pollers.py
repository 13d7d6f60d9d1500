# Poll wake-ups of the mailbox node: a poll(2) on ipuN_mailbox that finds no
# ICU response waiting and asks to be told (FUSE_POLL_SCHEDULE_NOTIFY)
# leaves its kernel handle here; once a response is queued the kernel is
# sent FUSE_NOTIFY_POLL for it, and the caller polls again (fuse(4),
# linux/fuse.h: fuse_notify_poll_wakeup_out).
from __future__ import annotations

from ipufs.driver.devices import DeviceSet
from ipufs.driver.mapping import Kernel
from ipufs.fuse import replies as rp


class PollWakeups:
    """Poll handles awaiting an ICU response, per IPU."""

    def __init__(self, devices: DeviceSet, kernel: Kernel) -> None:
        self.devices = devices
        self.kernel = kernel
        self.waiting: dict[int, set[int]] = {}  # ipu -> poll handles

    def add(self, ipu: int, kh: int) -> None:
        self.waiting.setdefault(ipu, set()).add(kh)

    def wake(self, ipu: int | None = None) -> None:
        """Wake the pollers of ``ipu`` (or of every IPU) that now have a
        response to read."""
        if not self.waiting:
            return
        for index in list(self.waiting) if ipu is None else [ipu]:
            handles = self.waiting.get(index)
            if handles and self.devices.ipus[index].icu.responses_waiting:
                for kh in handles:
                    self.kernel.notify(rp.notify_poll_wakeup(kh))
                del self.waiting[index]
