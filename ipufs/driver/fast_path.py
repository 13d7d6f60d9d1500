# The native fast path's Python side (native/src/fastpath.c answers; docs/
# serving.md, "The fast path"). The native readers answer the hot
# requests themselves, without the GIL: the ioctls whose row of the
# driver's table (driver.IOCTL_ROLES, its `fast` column) says how, in the
# cases where the answer depends only on state published here and serving
# it has no effect that needs Python. This module publishes that state and
# keeps it current:
#
# - the ioctl table (type byte, and for each number its answer and its
#   needs-a-writable-open column), the mailbox rings' layout, and each
#   IPU's mailbox words with the ICU's change sequence (which the model
#   then claims atomically, as the native code does to pop a response);
# - the open files (file handle -> IPU, opened for writing), as the device
#   nodes open and release them;
# - a hold word, nonzero while anything the Python path does around a
#   request is active: tracing (events of every ioctl), fault plans
#   counting accesses, or page-cache mode (mapped stores retrieved before a
#   request, postponed replies). Every request then goes to Python.
#
# What the native path does itself: the activity time the register
# watcher paces itself by (RegisterUse, which asks `last`), and a count of
# the requests it answered (the daemon's status adds it).
from __future__ import annotations

import enum
import threading

from ipufs.abi import icu
from ipufs.abi import ioctls as abi
from ipufs.driver.device_nodes import AccessCounter
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IOCTL_ROLES, OpenFile
from ipufs.driver.events import EventSink
from ipufs.driver.mapping import BarMapping
from ipufs.native import FastAnswer, FastPath


class Hold(enum.IntFlag):
    """Why every request goes to Python now (the hold word's bits)."""

    TRACED = 1  # a trace listens: each ioctl is an event
    COUNTED = 2  # a fault plan counts accesses
    PAGE_CACHE = 4  # mapped stores are retrieved before requests


_HELD = {Hold.TRACED: "a trace listens", Hold.COUNTED: "a fault plan counts accesses",
         Hold.PAGE_CACHE: "page-cache mode"}


class FastAnswers:
    """Keeps ``path`` (the native state) current for ``devices``; the
    device nodes tell it of opens and releases, the tracer and the plan
    runner of changes (``refresh``)."""

    def __init__(self, path: FastPath, devices: DeviceSet, *, tracer: EventSink, accesses: AccessCounter,
                 mapping: BarMapping) -> None:
        self.path = path
        self.devices = devices
        self.tracer = tracer
        self.accesses = accesses
        self.mapping = mapping
        self._lock = threading.Lock()  # refreshes compute and store the hold as one step
        path.ioctl_type(abi.IOCTL_TYPE)
        for spec, role in IOCTL_ROLES.items():
            path.ioctl(spec.nr, role.fast, spec.needs_write)
        head = icu.Header.RESPONSE_HEAD // 4
        assert icu.Header.RESPONSE_TAIL // 4 == head + 1  # one 64-bit load reads both
        path.rings(icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING, icu.SLOTS, icu.SLOT_SIZE, head,
                   icu.Header.STATUS // 4, icu.STATUS_RESPONSES)
        for index, ipu in enumerate(devices.ipus):
            # The fast path pops responses: the model's changes of the
            # ring claim its sequence atomically from now on.
            ipu.icu.claim, ipu.icu.release = FastPath.claimer(ipu.icu.sequence)
            path.mailbox(index, ipu.icu.mailbox.words, ipu.icu.sequence)
        self.refresh()

    @property
    def hold(self) -> Hold:
        """What sends every request to Python now."""
        hold = Hold(0)
        if self.tracer.enabled:
            hold |= Hold.TRACED
        if self.accesses.counting:
            hold |= Hold.COUNTED
        if self.mapping.stores is not None or self.mapping.publisher is not None:
            hold |= Hold.PAGE_CACHE
        return hold

    def refresh(self) -> None:
        """Publish the hold anew (something it depends on may have changed)."""
        with self._lock:
            self.path.hold(int(self.hold))

    @property
    def state(self) -> str:
        """"on", or "held" and why."""
        hold = self.hold
        return "on" if not hold else "held: " + ", ".join(_HELD[bit] for bit in Hold if bit in hold)

    def opened(self, fh: int, f: OpenFile) -> None:
        """A device node was opened (the mode may have settled with it)."""
        self.path.opened(fh, f.node.ipu, f.writable)
        self.refresh()

    def released(self, fh: int) -> None:
        self.path.released(fh)

    def last(self, ipu: int) -> float:
        """time.monotonic() of the last request answered natively for IPU
        ``ipu`` (-inf: none)."""
        return self.path.last(ipu)

    @property
    def answered(self) -> int:
        return self.path.answered


def qualifying() -> dict[str, FastAnswer]:
    """The ioctls the fast path answers (by name), from the driver's table."""
    return {spec.name: role.fast for spec, role in IOCTL_ROLES.items() if role.fast is not FastAnswer.NONE}
