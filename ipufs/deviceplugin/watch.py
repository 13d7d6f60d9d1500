# Keeps what the device plugin reports current: which IPUs the mount has,
# and whether each is healthy (health.py). Device health comes from the
# status registers, read through a read-only mapping of each ipuN (loads
# only: no request to the daemon). The daemon's live trace, subscribed to
# over its control socket (docs/control.md), says when to read them again:
# a fault injected, a reset, a register command, a signal. A slow poll
# covers what leaves no trace (a store through a mapping, an ICU timeout
# running out). The same connection tells at once when the daemon dies: it
# closes. Then every IPU is unhealthy, and the watch connects again, as
# often as --retry-interval allows, until a daemon serves the mount again.
from __future__ import annotations

import json
import logging
import os
import selectors
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ipufs.client import Control, ControlError
from ipufs.client.status import StatusView
from ipufs.deviceplugin import health
from ipufs.deviceplugin.health import Health
from ipufs.deviceplugin.inventory import Inventory, discover
from ipufs.problems import Problem

log = logging.getLogger(__name__)

# Trace events after which a status register may have moved. Every other
# kind of the daemon's (ipufs/driver/events.py) is named below it, so that
# a new kind is a decision (tests/deviceplugin/test_trace_kinds.py).
TRACE_KINDS = ("register-write", "mailbox-write", "ioctl", "icu", "signal", "fault")
# Opens, closes and register reads never move one (and other tools make
# many); attaching and detaching neither. A tile program's events (start,
# exit, sync, exception) come at the program's pace: an exception it raises
# shows in the signal it sends an attached process, else at the next poll.
UNWATCHED_KINDS = ("open", "close", "register-read", "attach", "detach", "program")


@dataclass(frozen=True)
class State:
    """What the watch knows, and a number that grows with every change."""

    version: int = 0
    inventory: Inventory | None = None
    health: dict[int, Health] = field(default_factory=dict)
    problem: str = ""  # why there is no inventory, or why all are unhealthy


class _Gone(Exception):
    """The daemon closed its control connection."""


def _reason(exc: Exception) -> str:
    return exc.what if isinstance(exc, Problem) else str(exc)


class _Session:
    """One connection to a live daemon: its inventory, a trace subscription
    and a status mapping per IPU."""

    def __init__(self, root: Path) -> None:
        self.inventory = discover(root)
        self.views: dict[int, StatusView] = {}
        self.control = Control.of_mount(self.inventory.mountpoint, timeout=5)
        try:
            self.control.sock.sendall(json.dumps({"op": "trace", "kinds": list(TRACE_KINDS)}).encode() + b"\n")
            first = json.loads(self.control.file.readline() or b"{}")
            if not first.get("ok"):
                raise ControlError(first.get("error", "the daemon refused to trace"))
            for ipu in self.inventory.ipus:
                self.views[ipu] = StatusView(ipu, root)
        except BaseException:
            self.close()
            raise

    def health(self) -> dict[int, Health]:
        return {ipu: health.of_status(view.read()) for ipu, view in self.views.items()}

    def drain(self) -> None:
        """Take what the trace sent (only its arrival matters)."""
        try:
            if not self.control.sock.recv(1 << 16):
                raise _Gone
        except (ConnectionError, TimeoutError) as exc:
            raise _Gone from exc

    def close(self) -> None:
        for view in self.views.values():
            view.close()
        self.control.close()


class DeviceWatch:
    """Watches the IPUs under ``root`` from a thread of its own; readers take
    ``state`` or wait for a newer one."""

    def __init__(self, root: Path, *, poll_interval: float = 1.0, retry_interval: float = 0.5) -> None:
        self.root = root
        self.poll_interval = poll_interval
        self.retry_interval = retry_interval
        self._state = State(problem=f"not looked at {root} yet")
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._run, name="ipufs-device-watch", daemon=True)

    # --- readers -------------------------------------------------------------
    @property
    def state(self) -> State:
        with self._changed:
            return self._state

    def wait_newer(self, version: int, timeout: float) -> State:
        """The state once its version differs from ``version``, or as it is
        after ``timeout`` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self._state.version != version or self._stopping.is_set(), timeout)
            return self._state

    # --- life ----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        os.write(self._wake_w, b"x")
        with self._changed:
            self._changed.notify_all()
        self._thread.join(10)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _publish(self, inventory: Inventory | None, states: dict[int, Health], problem: str = "") -> None:
        with self._changed:
            old = self._state
            if (old.inventory, old.health, old.problem) == (inventory, states, problem):
                return
            for ipu, h in sorted(states.items()):
                if old.health.get(ipu) != h:
                    log.info("ipu%d: %s%s", ipu, h.state, f" ({h.reason})" if h.reason else "")
            self._state = State(old.version + 1, inventory, states, problem)
            self._changed.notify_all()

    def _down(self, problem: str) -> None:
        """No daemon: the IPUs last seen stay listed, all unhealthy."""
        inventory = self.state.inventory
        if problem != self.state.problem:
            log.warning("%s", problem)
        states = {ipu: health.unreachable(problem) for ipu in inventory.ipus} if inventory else {}
        self._publish(inventory, states, problem)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                session = _Session(self.root)
            except Exception as exc:  # whatever it is, the watch goes on: the IPUs are unreachable
                log.debug("connecting to the daemon of %s", self.root, exc_info=exc)
                self._down(f"no daemon serves {self.root}: {_reason(exc)}")
                self._sleep(self.retry_interval)
                continue
            try:
                self._follow(session)
                problem = "stopping"
            except _Gone:
                problem = f"the daemon serving {session.inventory.mountpoint} went away"
            except Exception as exc:
                log.debug("following the daemon of %s", self.root, exc_info=exc)
                problem = f"lost the daemon serving {session.inventory.mountpoint}: {_reason(exc)}"
            finally:
                session.close()
            if not self._stopping.is_set():
                self._down(problem)

    def _follow(self, session: _Session) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(session.control.sock, selectors.EVENT_READ, "trace")
            selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while not self._stopping.is_set():
                self._publish(session.inventory, session.health())
                for key, _ in selector.select(self.poll_interval):
                    if key.data == "wake":
                        return
                    session.drain()

    def _sleep(self, seconds: float) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            selector.select(seconds)
