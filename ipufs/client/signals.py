# Receiving the driver's real-time signals in Python. Python's own siginfo
# lacks si_int, so signals 44..49 are blocked and read from a signalfd,
# whose records carry it (struct signalfd_siginfo, <sys/signalfd.h>).
from __future__ import annotations

import os
import select
import signal
import struct
import time
from dataclasses import dataclass

from ipufs import native
from ipufs.abi.interrupts import SIGNAL_NAMES
from ipufs.abi.interrupts import FIRST_SIGNAL, Interrupt

SIGNALFD_SIGINFO = struct.Struct("<IiiIIiIIIIiiQ")  # first fields of the 128-byte record
RECORD = 128
SIGNALS = range(FIRST_SIGNAL, FIRST_SIGNAL + len(Interrupt))


@dataclass(frozen=True)
class SignalInfo:
    signo: int
    code: int  # si_code: SI_QUEUE (-1) from ipufs
    pid: int  # si_pid: the daemon
    value: int  # si_int: the IPU id

    @property
    def name(self) -> str:
        return SIGNAL_NAMES[Interrupt(self.signo - FIRST_SIGNAL)]


class SignalReceiver:
    """Blocks signals 44..49 in the calling thread and reads them from a
    signalfd. Create it before any other thread starts, so that they all
    inherit the mask: a thread that does not block these signals may be
    the one to take them, and their default action ends the process. Some
    libraries start threads when imported (numpy's OpenBLAS does), so
    create it before importing those; ipufs.client itself starts none and
    does not import numpy.

    Closing it drains what is queued, then gives the thread its old mask
    back. The last close of an IPU's file detaches, but the kernel sends
    that release to the daemon after close() returns, so a signal may
    still come after a receiver closed and end the process (their default
    action). A process that exits once done can pass ``restore_mask=False``:
    the signals stay blocked until it exits."""

    def __init__(self, restore_mask: bool = True) -> None:
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        self._restore = restore_mask
        self.fd = native.signalfd(SIGNALS.start, SIGNALS.stop - 1)

    def fileno(self) -> int:
        return self.fd

    def receive(self, timeout: float | None = 0.0) -> list[SignalInfo]:
        """Every signal queued now, waiting up to ``timeout`` seconds for
        the first one (None: forever)."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        out: list[SignalInfo] = []
        while True:
            try:
                data = os.read(self.fd, RECORD * 64)
            except BlockingIOError:
                return out
            for offset in range(0, len(data), RECORD):
                signo, _, code, pid, _, _, _, _, _, _, _, value, _ = SIGNALFD_SIGINFO.unpack_from(data, offset)
                out.append(SignalInfo(signo, code, pid, value))

    def wait_for(self, count: int, timeout: float) -> list[SignalInfo]:
        """Collect signals until ``count`` have come or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        got: list[SignalInfo] = []
        while len(got) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            got += self.receive(left)
        return got

    def close(self) -> None:
        """Drop what is queued and stop receiving (see the class)."""
        if self.fd >= 0:
            self.receive(0.0)  # a pending one would be delivered, and its default action taken, at unblocking
            os.close(self.fd)
            self.fd = -1
            if self._restore:
                signal.pthread_sigmask(signal.SIG_SETMASK, self._old)

    def __enter__(self) -> SignalReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
