# The device's monitoring, which the real driver's STOP_MONITORING and
# START_MONITORING ioctls stop and start, and the error total its
# ACCUMULATE_ERRORS ioctl folds counters into (the calls a runtime that
# drives a C600 makes at bring-up: osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs). What they cover is ipufs's own
# (docs/abi.md): while monitoring is stopped the device counts no errors
# (correctable link errors, parity errors that loads and TDI reads hit)
# and samples no utilisation; ACCUMULATE_ERRORS adds the errors counted
# since its last call to a total that only grows.
from __future__ import annotations

from ipufs.abi.registers import ExceptionCause
from ipufs.model.link import LinkErrors


class Monitoring:
    """Whether the device counts errors and samples utilisation, and the
    errors accumulated so far."""

    def __init__(self, link: LinkErrors) -> None:
        self.link = link
        self.running = True
        #: parity errors raised while monitoring ran (a load, fetch or TDI read of a bad word)
        self.parity_errors = 0
        #: errors ACCUMULATE_ERRORS has folded, since the daemon started
        self.accumulated = 0
        self._folded = (0, 0)  # link errors and parity errors at the last fold

    def stop(self) -> None:
        self.running = False
        self.link.counting = False

    def start(self) -> None:
        self.running = True
        self.link.counting = True

    def excepted(self, cause: int) -> None:
        """An exception was raised: a parity error counts while monitoring runs."""
        if self.running and cause == ExceptionCause.PARITY:
            self.parity_errors += 1

    def accumulate(self) -> int:
        """Fold the errors counted since the last fold into the total;
        returns how many were folded."""
        link, parity = self._folded
        new = (self.link.total - link) + (self.parity_errors - parity)
        self._folded = (self.link.total, self.parity_errors)
        self.accumulated += new
        return new
