# What the driver tells about itself as it works: opens, register accesses,
# ioctls, attachments, signals. The driver emits raw facts to an EventSink;
# the daemon's tracer (ipufs/daemon/trace.py) decodes and ships them. With
# no listener `enabled` is False and every emitting site costs one check.
from __future__ import annotations

from typing import Any, Protocol


class EventSink(Protocol):
    #: Whether anyone listens; read before building an event.
    enabled: bool

    def emit(self, kind: str, ipu: int | None, **fields: Any) -> None:
        """Record an event; call only when ``enabled``."""


class NoEvents:
    """The sink of a driver nobody traces."""

    enabled = False

    def emit(self, kind: str, ipu: int | None, **fields: Any) -> None:
        pass
