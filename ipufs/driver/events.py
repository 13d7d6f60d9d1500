# What the driver tells about itself as it works: opens, register accesses,
# ioctls, ICU messages, attachments, signals, faults fired. Each kind of
# event is one record, defined once here with the readable fields it shows
# (`ipufs trace`, the trace file; docs/faults.md); how an ioctl's argument
# reads is a column of the ABI table (ipufs/abi/ioctls.py, `shown`). The
# driver emits records to an EventSink; the daemon's tracer (ipufs/daemon/
# trace.py) stamps and ships them. With no listener `enabled` is False and
# every emitting site costs one check.
from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ipufs.abi import ioctls
from ipufs.abi.icu import op_name
from ipufs.abi.registers import BY_OFFSET


@dataclass(frozen=True, slots=True)
class Event:
    #: The event's kind, as traces and filters name it.
    kind: ClassVar[str]
    ipu: int | None

    def fields(self) -> dict[str, Any]:
        """What the event shows, readable (JSON-ready)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Opened(Event):
    kind = "open"
    node: str
    pid: int
    fh: int
    mode: str
    flags: int

    def fields(self) -> dict[str, Any]:
        return {"node": self.node, "pid": self.pid, "fh": self.fh, "mode": self.mode, "flags": oct(self.flags)}


@dataclass(frozen=True, slots=True)
class Closed(Event):
    kind = "close"
    node: str
    fh: int

    def fields(self) -> dict[str, Any]:
        return {"node": self.node, "fh": self.fh}


#: the most words of an access whose values a register event shows
SHOWN_WORDS = 8


def _registers(offset: int, data: bytes) -> dict[str, Any]:
    """A config space access: the registers it covers and, for a single
    register, its value; for up to SHOWN_WORDS whole aligned words, the
    value of each (a host may store adjacent registers in one write)."""
    names = [BY_OFFSET[o].name for o in range(offset - offset % 4, offset + len(data), 4) if o in BY_OFFSET]
    fields: dict[str, Any] = {"offset": hex(offset), "length": len(data), "registers": names}
    if len(data) == 4 and offset % 4 == 0:
        fields["value"] = hex(int.from_bytes(data, "little"))
    elif offset % 4 == 0 and len(data) % 4 == 0 and 4 < len(data) <= 4 * SHOWN_WORDS:
        fields["values"] = [hex(int.from_bytes(data[i:i + 4], "little")) for i in range(0, len(data), 4)]
    return fields


@dataclass(frozen=True, slots=True)
class _RegisterAccess(Event):
    pid: int
    offset: int
    data: bytes

    def fields(self) -> dict[str, Any]:
        return {"pid": self.pid, **_registers(self.offset, self.data)}


@dataclass(frozen=True, slots=True)
class RegisterRead(_RegisterAccess):
    kind = "register-read"


@dataclass(frozen=True, slots=True)
class RegisterWrite(_RegisterAccess):
    kind = "register-write"


@dataclass(frozen=True, slots=True)
class MailboxWrite(Event):
    kind = "mailbox-write"
    pid: int
    offset: int
    data: bytes  # at most its first 64 bytes

    def fields(self) -> dict[str, Any]:
        return {"pid": self.pid, "offset": self.offset, "data": self.data.hex()}


def describe_ioctl(cmd: int, arg: int, data: bytes) -> dict[str, Any]:
    """An ioctl request decoded by name, its argument as the ABI table's
    ``shown`` column reads it."""
    _, type_, nr, size = ioctls.ioc_fields(cmd)
    spec = ioctls.BY_NR.get(nr) if type_ == ioctls.IOCTL_TYPE else None
    if spec is None:
        return {"name": f"0x{cmd:08x}", "size": size}
    return {"name": spec.name, "size": size, **spec.shown.read(arg, data)}


@dataclass(frozen=True, slots=True)
class IoctlDone(Event):
    kind = "ioctl"
    pid: int
    cmd: int
    arg: int
    data: bytes
    result: int = 0
    out: bytes = b""  # at most its first 32 bytes
    error: int | None = None  # the errno it failed with

    def fields(self) -> dict[str, Any]:
        fields = {"pid": self.pid, **describe_ioctl(self.cmd, self.arg, self.data)}
        if self.error is not None:
            fields["error"] = errno.errorcode.get(self.error, str(self.error))
        else:
            fields.update(result=self.result, out=self.out.hex())
        return fields


@dataclass(frozen=True, slots=True)
class IcuExchange(Event):
    kind = "icu"
    request: tuple[int, ...]
    answer: tuple[int, ...] | None

    def fields(self) -> dict[str, Any]:
        return {"op": op_name(self.request[0]), "request": [hex(w) for w in self.request],
                "answer": None if self.answer is None else [hex(w) for w in self.answer]}


@dataclass(frozen=True, slots=True)
class SignalSent(Event):
    kind = "signal"
    pid: int
    signo: int
    name: str
    si_int: int

    def fields(self) -> dict[str, Any]:
        return {"pid": self.pid, "signo": self.signo, "name": self.name, "si_int": self.si_int}


@dataclass(frozen=True, slots=True)
class Attached(Event):
    kind = "attach"
    pid: int
    command: str

    def fields(self) -> dict[str, Any]:
        return {"pid": self.pid, "command": self.command}


@dataclass(frozen=True, slots=True)
class Detached(Event):
    kind = "detach"
    pid: int
    reason: str

    def fields(self) -> dict[str, Any]:
        return {"pid": self.pid, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class FaultFired(Event):
    kind = "fault"
    fault: str  # as `ipufs inject` describes it

    def fields(self) -> dict[str, Any]:
        return {"fault": self.fault}


@dataclass(frozen=True, slots=True)
class ProgramEvent(Event):
    """What tile code did: started, exited, excepted, synced
    (docs/execution.md)."""

    kind = "program"
    event: str
    tile: int
    context: int
    pc: int
    detail: str

    def fields(self) -> dict[str, Any]:
        return {"event": self.event, "tile": self.tile, "context": self.context, "pc": self.pc,
                "detail": self.detail}


#: Every kind of event, in the order docs/faults.md lists them.
EVENTS: tuple[type[Event], ...] = (Opened, Closed, RegisterRead, RegisterWrite, MailboxWrite, IoctlDone,
                                    IcuExchange, SignalSent, Attached, Detached, FaultFired, ProgramEvent)
KINDS: tuple[str, ...] = tuple(e.kind for e in EVENTS)
if len(set(KINDS)) != len(KINDS):  # fail at import
    raise ImportError("two event records share a kind")


class EventSink(Protocol):
    #: Whether anyone listens; read before building an event.
    enabled: bool

    def emit(self, event: Event) -> None:
        """Record an event; call only when ``enabled``."""


class NoEvents:
    """The sink of a driver nobody traces."""

    enabled = False

    def emit(self, event: Event) -> None:
        pass
