# Interrupts as real-time signals: after each action of the model, the
# interrupts it made deliverable are sent to the attached process of their
# IPU as signals 44..49 through the attachment's pidfd, with si_int = the
# id SET_IPU_ID gave (docs/abi.md, "Interrupts"). An interrupt of an IPU
# nobody is attached to, or whose process is gone, is counted as dropped.
from __future__ import annotations

import errno
import logging
from collections.abc import Callable

from ipufs.abi.interrupts import FIRST_SIGNAL, SIGNAL_NAMES, Interrupt
from ipufs.driver import events
from ipufs.driver.attachments import AttachmentTable
from ipufs.driver.devices import DeviceSet
from ipufs.driver.events import EventSink
from ipufs.driver.system import SystemCalls

log = logging.getLogger(__name__)


class SignalDelivery:
    """Sends the signals of ``devices``' deliverable interrupts to the
    processes of ``attachments``, and counts what was sent and dropped by
    IPU and source. ``detach(ipu, reason)`` ends an attachment whose
    process is gone."""

    def __init__(self, devices: DeviceSet, attachments: AttachmentTable, system: SystemCalls, tracer: EventSink,
                 detach: Callable[[int, str], None]) -> None:
        self.devices = devices
        self.attachments = attachments
        self.system = system
        self.tracer = tracer
        self.detach = detach
        self.sent = [dict.fromkeys(Interrupt, 0) for _ in devices.ipus]
        self.dropped = [dict.fromkeys(Interrupt, 0) for _ in devices.ipus]

    def deliver(self) -> None:
        """Send the signals of every interrupt the model made deliverable,
        IPU by IPU in index order."""
        deliverable = self.devices.deliverable
        send_signal = self.system.send_signal
        while deliverable:
            index = min(deliverable)
            for source in self.devices.ipus[index].interrupts.take():  # takes index out
                att = self.attachments.get(index)
                if att is None:
                    self.dropped[index][source] += 1
                    continue
                try:
                    send_signal(att.pidfd, FIRST_SIGNAL + source, att.ipu_id)
                except OSError as exc:
                    self.dropped[index][source] += 1
                    if exc.errno == errno.ESRCH:
                        self.detach(index, "its process exited")
                    else:
                        log.warning("signal %d to process %d failed: %s", source.signal, att.pid, exc)
                    continue
                self.sent[index][source] += 1
                if self.tracer.enabled:
                    self.tracer.emit(events.SignalSent(index, att.pid, source.signal, SIGNAL_NAMES[source],
                                                       att.ipu_id))
