# The register watcher: a store through a mapping of config space (or of
# the mailbox's DOORBELL word) reaches no daemon code, so a trio task polls
# the command registers of every IPU whose config space or mailbox is open.
# It polls every FAST seconds while the IPU has been active within the last
# BUSY seconds, and every IDLE seconds otherwise: the latency bound of a
# mapped doorbell (docs/registers.md; measured in benchmarks/).
from __future__ import annotations

import time

import trio

from ipufs.driver.filesystem import IpuFilesystem

FAST = 100e-6
IDLE = 10e-3
BUSY = 1.0


class RegisterWatcher:
    def __init__(self, filesystem: IpuFilesystem, *, fast: float = FAST, idle: float = IDLE,
                 busy: float = BUSY) -> None:
        self.filesystem = filesystem
        self.fast, self.idle, self.busy = fast, idle, busy
        self.polls = 0

    def poll_once(self) -> bool:
        """Poll every watched IPU once; returns whether any is busy."""
        fs = self.filesystem
        now = time.monotonic()
        busy = False
        for index in fs.watched():
            if fs.devices.ipus[index].poll_registers():
                fs.activity[index] = now
                fs.settle(index)
            if now - fs.activity.get(index, float("-inf")) < self.busy:
                busy = True
        self.polls += 1
        return busy

    async def run(self) -> None:
        while True:
            await trio.sleep(self.fast if self.poll_once() else self.idle)
