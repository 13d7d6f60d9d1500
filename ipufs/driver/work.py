# The one unit of work on the device: whoever acts on the model (a client's
# request, a store the register watcher found, a fault, a timer, the
# control server, tile code running) does it through a DeviceWork, which
# holds the daemon's lock while the action runs and then, once, carries out
# what followed (ModelEffects: publish, signal, wake pollers) and marks the
# IPU busy when a client caused it (RegisterUse: the register watcher's
# pace). One place, so that no path forgets a step.
#
# Requests come in on the FUSE reader, which already holds the lock for
# the whole request: they call `done(ipu, ...)` when the model has acted.
# Everything else calls `act(ipu, action)`. (Fault plans count a client's
# accesses, which is the device nodes' business: DeviceNodes._count_access.)
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ipufs.driver.activity import RegisterUse
from ipufs.driver.effects import ModelEffects

T = TypeVar("T")


class DeviceWork:
    """Acting on the devices, and everything that must follow, in one place."""

    def __init__(self, effects: ModelEffects, use: RegisterUse, *, lock: threading.RLock) -> None:
        self.effects = effects
        self.use = use
        self.lock = lock
        self._last = use.last  # RegisterUse.touched, inlined on the request path
        self._deliver = effects.deliver

    def done(self, ipu: int | None, touched: bool = False) -> None:
        """The model has acted on IPU ``ipu`` (None: any): carry out what
        followed. ``touched``: a client caused it, so the IPU is busy."""
        if touched and ipu is not None:
            self._last[ipu] = time.monotonic()
        self._deliver(ipu)

    def act(self, ipu: int | None, action: Callable[[], T], *, touched: bool = False) -> T:
        """Run ``action`` on the model under the lock, then done()."""
        with self.lock:
            result = action()
            self.done(ipu, touched=touched)
        return result
