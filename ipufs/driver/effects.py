# What must follow every action of the model, whoever caused it (a client's
# request, a store found by the register watcher, a fault, a timer): make
# what it wrote visible to clients that see copies (page-cache mode), send
# the signals of the interrupts it raised, and wake pollers of responses it
# queued. One place, so that no path forgets a step.
from __future__ import annotations

import threading

from ipufs.driver.driver import IpuDriver
from ipufs.driver.mapping import BarMapping
from ipufs.driver.pollers import PollWakeups


class ModelEffects:
    """Carries the model's effects out to clients."""

    def __init__(self, mapping: BarMapping, driver: IpuDriver, pollers: PollWakeups, *,
                 lock: threading.RLock) -> None:
        self.mapping = mapping
        self.driver = driver
        self.pollers = pollers
        self.lock = lock  # the daemon's

    def deliver(self, ipu: int | None = None) -> None:
        """After the model acted (on IPU ``ipu``, or any): publish what it
        wrote, send the signals it raised, wake pollers."""
        # On every request: each step costs a call only when it has work.
        publisher = self.mapping.publisher
        if publisher is not None:
            publisher.publish()
        # Every IPU with signals to send: an IPU's action can raise
        # interrupts across its sync group (a GS2 barrier completing).
        if self.driver.devices.deliverable:
            # In page-cache mode a signal waits for the stores queued
            # before it: a client that acts on it (stores a command again)
            # must find the device's words in its mapping, and its store
            # must not be overwritten by an older one.
            if publisher is None or not self.mapping.kernel.call_after(self._deliver_later):
                self.driver.signals.deliver()
        if self.pollers.waiting:
            self.pollers.wake(ipu)

    def _deliver_later(self) -> None:
        with self.lock:
            self.driver.signals.deliver()
