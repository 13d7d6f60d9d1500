# The trace of what clients do and what the device does back: opens,
# register reads and writes, ioctls decoded by name, ICU messages, signals,
# attach and detach, faults fired (docs/faults.md). The driver emits raw
# facts (ipufs/driver/events.py); the tracer decodes them into readable
# fields and sends them to live subscribers (`ipufs trace`, through the
# control socket) and to a file of bounded size. With neither, `enabled` is
# False and every emitting site costs one attribute check.
from __future__ import annotations

import collections
import errno
import json
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from ipufs import __version__
from ipufs.driver import events

log = logging.getLogger(__name__)

#: The kinds of event a trace may be filtered on (ipufs/driver/events.py).
KINDS = events.KINDS


@dataclass
class Filter:
    ipu: int | None = None
    kinds: frozenset[str] = frozenset()

    def matches(self, event: dict[str, Any]) -> bool:
        return (self.ipu is None or event.get("ipu") == self.ipu) and (not self.kinds or event["kind"] in self.kinds)


@dataclass
class Subscriber:
    filter: Filter
    send: trio.MemorySendChannel[dict[str, Any]]
    dropped: int = 0


class TraceFileRefused(RuntimeError):
    """The trace file named at start cannot be written; the message says
    why in one line (never taken for a lack of privilege to mount)."""


def _refusal(path: str, exc: OSError) -> TraceFileRefused:
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        # O_NOFOLLOW says ELOOP; a link of another user's in a sticky
        # directory is refused (EACCES) before that.
        return TraceFileRefused(f"trace file {path} is a symbolic link (owned by uid {st.st_uid}); the trace "
                                "is written only to a regular file: remove the link or name another file")
    reason = exc.strerror or str(exc)
    return TraceFileRefused(reason if reason.startswith("trace file ") else f"trace file {path}: {reason}")


#: The kind of the first line of every trace file ipufs writes: how the
#: daemon knows, at a restart or a rotation, that a file it finds is its own.
HEADER_KIND = "trace-file"
#: How much of an existing file is read to find that line.
_HEADER_READ = 4096


def _is_header(data: bytes) -> bool:
    line = data.split(b"\n", 1)[0]
    try:
        first = json.loads(line)
    except ValueError:
        return False
    return isinstance(first, dict) and first.get("kind") == HEADER_KIND and first.get("seq") == 0


def _rotation_slot_is_free(path: str) -> bool:
    """Whether rotation may put the full file at ``path`` (PATH.1): nothing
    is there, a symbolic link is (the rename replaces the link, never what
    it names), or a trace file of ipufs's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return True
    except OSError as exc:
        return exc.errno == errno.ELOOP
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and _is_header(os.pread(fd, _HEADER_READ, 0))
    finally:
        os.close(fd)


@dataclass
class TraceFile:
    """Events as JSON lines in ``path``; past ``max_bytes`` the file is
    moved to ``path.1`` (replacing an older one) and a new one begun.

    The trace names processes and shows register values and ICU messages,
    so the file gets the nodes' owner and group and at most their read
    and write bits (never more than ``mode & 0o644``). The daemon writes
    only files it made: a new one is created with O_EXCL and begins with
    a header line (kind HEADER_KIND); an existing one is taken up again
    only if it begins so, is a regular file with one link and belongs to
    the daemon's user or the nodes' owner, opened with O_NOFOLLOW. So a
    name planted in a shared directory cannot make the daemon write, chown
    or rename anything else, and a file named by mistake (/etc/shadow) is
    refused untouched. Rotation replaces ``path.1`` only when it is
    missing, a link, or a trace file of ours."""

    path: str
    max_bytes: int
    uid: int = -1
    gid: int = -1
    mode: int = 0o600
    written: int = field(default=0)

    def __post_init__(self) -> None:
        self.mode &= 0o644
        try:
            self.file = self._open()
            if not _rotation_slot_is_free(self.path + ".1"):
                self.file.close()
                raise OSError(errno.EEXIST, f"trace file {self.path}.1, where rotation would move the full "
                                            "trace, exists and was not written by ipufs: remove it or name "
                                            "another trace file")
        except OSError as exc:
            raise _refusal(self.path, exc) from None
        self.written = self.file.tell()

    def _open(self) -> Any:
        """The trace file: a new one, or one of ours found there."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_CREAT
                         | os.O_EXCL, self.mode)
        except FileExistsError:
            return self._adopt(self._open_existing(), new=False)
        return self._adopt(fd, new=True)

    def _open_existing(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OSError(errno.ELOOP, f"trace file {self.path} is a symbolic link") from None
            raise
        return fd

    def _adopt(self, fd: int, *, new: bool) -> Any:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise OSError(errno.EPERM, f"trace file {self.path} must be a regular file with one link")
            if st.st_uid not in (os.geteuid(), self.uid):
                raise OSError(errno.EPERM, f"trace file {self.path} belongs to uid {st.st_uid}")
            if not new and not _is_header(os.pread(fd, _HEADER_READ, 0)):
                raise OSError(errno.EEXIST, f"trace file {self.path} exists and was not written by ipufs (it "
                                            f"does not begin with a {HEADER_KIND} line); it is left untouched: "
                                            "name a new file, or remove this one")
            if os.geteuid() == 0 and (self.uid, self.gid) != (-1, -1):
                os.fchown(fd, self.uid, self.gid)
            os.fchmod(fd, self.mode)
            os.set_blocking(fd, True)
            file = os.fdopen(fd, "a", buffering=1)
        except BaseException:
            os.close(fd)
            raise
        if new:
            file.write(json.dumps(self._header(), separators=(",", ":")) + "\n")
        return file

    def _header(self) -> dict[str, Any]:
        return {"seq": 0, "time": round(time.time(), 6), "kind": HEADER_KIND, "ipu": None,
                "ipufs": __version__, "pid": os.getpid()}

    def write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":")) + "\n"
        if self.written + len(line) > self.max_bytes and self.written:
            self.file.close()
            if not _rotation_slot_is_free(self.path + ".1"):
                raise OSError(errno.EEXIST, f"{self.path}.1 was replaced by a file ipufs did not write; "
                                            "the trace is not rotated over it")
            os.replace(self.path, self.path + ".1")  # renames the name, follows nothing
            self.file = self._open()
            self.written = self.file.tell()
        self.file.write(line)
        self.written += len(line)

    def close(self) -> None:
        self.file.close()


class Tracer:
    def __init__(self) -> None:
        self.enabled = False
        #: Told whenever ``enabled`` changes (the fast path holds while it is set).
        self.watchers: list[Callable[[], None]] = []
        self.subscribers: list[Subscriber] = []
        self.file: TraceFile | None = None
        self.sequence = 0
        #: The trio loop that owns the subscribers' channels while run()
        #: runs; events emitted from another thread (the FUSE reader) are
        #: handed to it.
        self._token: trio.lowlevel.TrioToken | None = None
        self._outbox: collections.deque[dict[str, Any]] = collections.deque()
        self._outbox_lock = threading.Lock()
        self._flush_scheduled = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hand events to live subscribers through this loop until
        cancelled; then close the trace file."""
        self._token = trio.lowlevel.current_trio_token()
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            self._token = None
            self.close()

    def _update(self) -> None:
        enabled = bool(self.subscribers) or self.file is not None
        if enabled != self.enabled:
            self.enabled = enabled
            for watcher in self.watchers:
                watcher()

    def open_file(self, path: str, max_bytes: int, *, uid: int = -1, gid: int = -1, mode: int = 0o600) -> None:
        """Trace to ``path`` too, a file owned by ``uid``:``gid`` with at
        most ``mode``'s read and write bits (the nodes' own)."""
        self.file = TraceFile(path, max_bytes, uid, gid, mode)
        self._update()

    def subscribe(self, filter_: Filter, buffer: int = 4096) -> tuple[Subscriber, trio.MemoryReceiveChannel[dict[str, Any]]]:
        send, receive = trio.open_memory_channel[dict[str, Any]](buffer)
        sub = Subscriber(filter_, send)
        self.subscribers.append(sub)
        self._update()
        return sub, receive

    def unsubscribe(self, sub: Subscriber) -> None:
        if sub in self.subscribers:
            self.subscribers.remove(sub)
        self._update()

    def dropped_notice(self, sub: Subscriber) -> dict[str, Any]:
        """The event that tells ``sub`` how many events it lost by falling
        behind since it was last told; its count starts again at 0."""
        count, sub.dropped = sub.dropped, 0
        return {"seq": self.sequence, "time": round(time.time(), 6), "kind": "dropped", "ipu": None,
                "count": count}

    def emit(self, record: events.Event) -> None:
        """Record an event; call only when ``enabled``."""
        self.sequence += 1
        event = {"seq": self.sequence, "time": round(time.time(), 6), "kind": record.kind, "ipu": record.ipu,
                 **record.fields()}
        if self.subscribers:
            token = self._token
            if token is None:
                self._deliver(event)
            else:
                # Batched: one wake-up of the loop carries every event queued
                # meanwhile, however fast the reader emits them.
                with self._outbox_lock:
                    self._outbox.append(event)
                    schedule = not self._flush_scheduled
                    self._flush_scheduled = True
                if schedule:
                    try:
                        token.run_sync_soon(self._flush)
                    except trio.RunFinishedError:
                        pass
        if self.file is not None:
            try:
                self.file.write(event)
            except OSError as exc:
                log.warning("trace file %s: %s; tracing to it stops", self.file.path, exc)
                self.file = None
                self._update()

    def _flush(self) -> None:
        with self._outbox_lock:
            events = list(self._outbox)
            self._outbox.clear()
            self._flush_scheduled = False
        for event in events:
            self._deliver(event)

    def _deliver(self, event: dict[str, Any]) -> None:
        for sub in list(self.subscribers):
            if sub.filter.matches(event):
                try:
                    sub.send.send_nowait(event)
                except trio.WouldBlock:
                    sub.dropped += 1
                except trio.ClosedResourceError:
                    pass

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        self._update()


def render(event: dict[str, Any]) -> str:
    """One event as a human-readable line."""
    fields = " ".join(f"{k}={_show(v)}" for k, v in event.items() if k not in ("seq", "time", "kind", "ipu"))
    stamp = time.strftime("%H:%M:%S", time.localtime(event["time"])) + f".{int(event['time'] * 1e6) % 1000000:06d}"
    where = "" if event.get("ipu") is None else f" ipu{event['ipu']}"
    return f"{stamp}{where} {event['kind']} {fields}".rstrip()


def _show(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)
