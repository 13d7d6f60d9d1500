# The register watcher: a store through a mapping of config space (or of
# the mailbox's DOORBELL word) reaches no daemon code, so the command
# registers of every IPU whose config space or mailbox is open are polled.
# Detection runs in a small thread, because trio's event loop cannot sleep
# for less than a millisecond (epoll's timeout unit): it only reads shared
# memory, every FAST seconds while an IPU has been active within the last
# BUSY seconds and every IDLE seconds otherwise, and hands the IPUs that
# need acting on to the trio loop, where the model is changed. This is the
# latency bound of a mapped command (docs/registers.md; benchmarks/).
from __future__ import annotations

import threading
import time

import trio

from ipufs.driver.filesystem import IpuFilesystem

FAST = 100e-6
IDLE = 10e-3
BUSY = 1.0


class RegisterWatcher:
    def __init__(self, filesystem: IpuFilesystem, *, fast: float = FAST, idle: float = IDLE,
                 busy: float = BUSY, lock: threading.RLock | None = None) -> None:
        self.filesystem = filesystem
        self.lock = lock or threading.RLock()
        self.fast, self.idle, self.busy = fast, idle, busy
        self.polls = 0
        self.actions = 0
        self._handed: set[int] = set()  # IPUs handed to the loop, not yet acted on

    def act(self, indices: list[int]) -> None:
        """In the trio loop: let the model act on what the host stored."""
        fs = self.filesystem
        self._handed.difference_update(indices)
        with self.lock:
            for index in indices:
                if index < len(fs.devices.ipus) and fs.devices.ipus[index].poll_registers():
                    fs.activity[index] = time.monotonic()
                    fs.settle(index)
                    self.actions += 1

    def scan(self) -> tuple[list[int], bool]:
        """Which watched IPUs need acting on, and whether any is busy. Reads
        only; runs in the watcher thread."""
        fs = self.filesystem
        now = time.monotonic()
        wanted, busy = [], False
        for index, users in list(fs.register_users.items()):
            if not users:
                continue
            if index not in self._handed and fs.devices.ipus[index].needs_poll():
                wanted.append(index)
            if now - fs.activity.get(index, float("-inf")) < self.busy:
                busy = True
        self.polls += 1
        return wanted, busy

    def _spin(self, token: trio.lowlevel.TrioToken, stop: threading.Event) -> None:
        while not stop.is_set():
            wanted, busy = self.scan()
            if wanted:
                self._handed.update(wanted)
                try:
                    token.run_sync_soon(self.act, wanted)  # wakes the loop; does not wait
                except trio.RunFinishedError:
                    return
                busy = True
            time.sleep(self.fast if busy else self.idle)

    async def run(self) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=self._spin, args=(trio.lowlevel.current_trio_token(), stop),
                                  name="ipufs-registers", daemon=True)
        thread.start()
        try:
            await trio.sleep_forever()
        finally:
            stop.set()
            # The thread may be waiting to hand work to this loop: let it
            # finish from a worker thread rather than block the loop.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(thread.join, 1.0)
