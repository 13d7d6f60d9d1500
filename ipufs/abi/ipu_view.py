# What the control socket's `ipu` operation answers about one IPU (and
# `status` about each): the one definition of its keys and their types,
# written by the daemon (ipufs/daemon/control/operations.py) and read by the
# tools, the exporter and gcipuinfo (ipufs/tools/devices.py). mypy checks
# both sides against it, so a key renamed on one side fails the type check
# instead of reading as absent. docs/control.md describes each key.
from __future__ import annotations

from typing import NotRequired, TypedDict


class ProcessNamespace(TypedDict):
    pid_ns: int  # the inode of the process's PID namespace
    pid: int  # its pid there


class AttachedProcess(TypedDict):
    pid: int | None  # as the asker's PID namespace numbers it; None: it cannot see the process
    pid_note: NotRequired[str]  # why pid is None
    command: str
    uid: int
    user: str
    ipu_id: int
    buffers: int
    buffer_bytes: int
    namespace: ProcessNamespace | None


class ExceptionHeld(TypedDict):
    cause: int
    tile: int
    address: int
    context: int


class Telemetry(TypedDict):
    temperature_mc: int
    power_mw: int
    clock_mhz: int


class IpuView(TypedDict):
    ipu: int
    attached: AttachedProcess | None
    signals_sent: dict[str, int]  # by signal name
    signals_dropped: dict[str, int]
    interrupts_raised: dict[str, int]
    reset_count: int
    exception_count: int  # raised since the last clear or reset
    parity_errors: int  # tile memory words whose parity is bad now
    use: float  # UTILISATION as a share, 0..1
    session_use: float | None  # the same over the current or last attachment
    energy_j: float | None  # joules drawn since the daemon started (None: no per-IPU power figure)
    link_errors: int  # correctable link errors since the daemon started
    link_errors_session: int | None  # the same during the current or last attachment
    exception: ExceptionHeld | None
    telemetry: Telemetry
