# The driver stack wired as the daemon wires it, in memory, for tests that
# need no root: the filesystem behind a fake kernel (tests/fuse/
# fakekernel.py), a stub for the kernel's side outside replies (backing
# files, notifications), and fake system calls for client processes: a
# table of live processes with their threads, pidfds, signals queued to
# them and their memory.
from __future__ import annotations

import errno
import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ipufs import native
from ipufs.driver.activity import RegisterUse
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IpuDriver
from ipufs.driver.effects import ModelEffects
from ipufs.driver.events import Event, EventSink
from ipufs.driver import sysfs_tree
from ipufs.driver.device_nodes import AccessCounter, DeviceNodes, NoCounting, NoFastPath
from ipufs.driver.fast_path import FastAnswers
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.driver.nodes import Ownership
from ipufs.driver.view_files import SysfsView
from ipufs.driver.mapping import BarMapping
from ipufs.driver.pollers import PollWakeups
from ipufs.driver.system import SystemCalls
from ipufs.driver.work import DeviceWork
from ipufs.fuse import requests as rq
from ipufs.fuse.session import Session
from tests.fuse import fakekernel as fk


class StubKernel:
    """The kernel outside replies: backing files it accepted (or refuses
    with ``fail``) and the notifications sent to it."""

    def __init__(self, fail: int | None = None) -> None:
        self.registered: list[int] = []
        self.notes: list[bytes] = []
        self.fail = fail

    def backing_open(self, fd: int) -> int:
        if self.fail:
            raise OSError(self.fail, os.strerror(self.fail))
        self.registered.append(fd)
        return len(self.registered)

    def notify(self, message: bytes, lost: object = None) -> None:
        self.notes.append(message)

    def call_after(self, action: object) -> bool:
        return False  # notifications are "written" at once: act now


@dataclass
class Process:
    """A fake client process: its threads and its memory (address -> byte)."""

    tgid: int
    threads: set[int] = field(default_factory=set)
    memory: dict[int, int] = field(default_factory=dict)
    alive: bool = True

    def map(self, address: int, data: bytes) -> None:
        for i, b in enumerate(data):
            self.memory[address + i] = b


class FakeProcesses:
    """Processes and the system calls on them, as the driver makes them."""

    def __init__(self) -> None:
        self.processes: dict[int, Process] = {}
        self.pidfds: dict[int, int] = {}  # pidfd -> tgid
        self.signals: list[tuple[int, int, int]] = []  # (tgid, signo, value)
        self._fds = itertools.count(1000)

    def spawn(self, tgid: int, *threads: int) -> Process:
        p = self.processes[tgid] = Process(tgid, {tgid, *threads})
        return p

    def _of_thread(self, pid: int) -> Process | None:
        return next((p for p in self.processes.values() if p.alive and pid in p.threads), None)

    def _live(self, pidfd: int) -> Process:
        p = self.processes.get(self.pidfds.get(pidfd, -1))
        if p is None or not p.alive:
            raise ProcessLookupError(errno.ESRCH, "No such process")
        return p

    def pidfd_open(self, tgid: int) -> int:
        p = self.processes.get(tgid)
        if p is None or not p.alive:
            raise ProcessLookupError(errno.ESRCH, "No such process")
        fd = next(self._fds)
        self.pidfds[fd] = tgid
        return fd

    def alive(self, pidfd: int) -> bool:
        try:
            self._live(pidfd)
        except ProcessLookupError:
            return False
        return True

    def send_signal(self, pidfd: int, signo: int, value: int) -> None:
        p = self._live(pidfd)
        self.signals.append((p.tgid, signo, value))

    def _memory_of(self, pid: int) -> Process:
        p = self.processes.get(pid)
        if p is None or not p.alive:
            raise ProcessLookupError(errno.ESRCH, "No such process")
        return p

    def vm_read(self, pid: int, address: int, length: int) -> bytes:
        p = self._memory_of(pid)
        try:
            return bytes(p.memory[a] for a in range(address, address + length))
        except KeyError:
            raise OSError(errno.EFAULT, "Bad address") from None

    def vm_write(self, pid: int, address: int, data: bytes) -> int:
        p = self._memory_of(pid)
        if any(a not in p.memory for a in range(address, address + len(data))):
            raise OSError(errno.EFAULT, "Bad address")
        p.map(address, data)
        return len(data)

    def tgid_of(self, pid: int) -> int | None:
        p = self._of_thread(pid)
        return None if p is None else p.tgid

    def command_of(self, pid: int) -> str:
        return f"proc{pid}"

    def calls(self) -> SystemCalls:
        return SystemCalls(send_signal=self.send_signal, pidfd_open=self.pidfd_open, alive=self.alive,
                           vm_read=self.vm_read, vm_write=self.vm_write, tgid_of=self.tgid_of,
                           command_of=self.command_of, pid_seen_by=lambda pid, asker: pid)


class FakeExits:
    """The exit watcher: pidfds watched, and a way to make a process exit."""

    def __init__(self, processes: FakeProcesses) -> None:
        self.processes = processes
        self.watched: dict[int, Callable[[], None]] = {}
        self.unwatched: list[int] = []

    def watch(self, pidfd: int, on_exit: Callable[[], None]) -> None:
        self.watched[pidfd] = on_exit

    def unwatch(self, pidfd: int) -> None:
        self.watched.pop(pidfd, None)
        self.unwatched.append(pidfd)

    def exit(self, tgid: int) -> None:
        """Process ``tgid`` exits: its pidfds become readable."""
        self.processes.processes[tgid].alive = False
        for pidfd, owner in list(self.processes.pidfds.items()):
            if owner == tgid and pidfd in self.watched:
                self.watched.pop(pidfd)()


class Events:
    """An event sink that keeps what it hears."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.seen: list[Event] = []

    def emit(self, event: Event) -> None:
        self.seen.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.seen]


class Rig:
    """The filesystem of ``devices`` and everything under it, faked below."""

    def __init__(self, devices: DeviceSet, *, passthrough: bool = True, fail: int | None = None,
                 ownership: Ownership | None = None, events: EventSink | None = None,
                 accesses: AccessCounter | None = None, fast: bool = False,
                 while_attached: str = "exclusive") -> None:
        self.devices = devices
        self.processes = FakeProcesses()
        self.exits = FakeExits(self.processes)
        self.events = events if events is not None else Events(enabled=False)
        self.stub = StubKernel(fail)
        tree = sysfs_tree.node_tree(len(devices))
        self.driver = IpuDriver(devices, exits=self.exits, events=self.events, system=self.processes.calls(),
                                while_attached=while_attached)
        self.use = RegisterUse()
        lock = threading.RLock()
        mapping = BarMapping(devices, tree, self.stub, passthrough=passthrough, use=self.use)
        self.effects = ModelEffects(mapping, self.driver, PollWakeups(devices, self.stub), lock=lock)
        self.work = DeviceWork(self.effects, self.use, lock=lock)
        accesses = accesses or NoCounting()
        #: The native fast path, published as the daemon publishes it (with ``fast``).
        self.fast = (FastAnswers(native.FastPath(len(devices)), devices, tracer=self.events, accesses=accesses,
                                 mapping=mapping) if fast else None)
        if self.fast is not None:
            self.use.elsewhere = self.fast.last
        self.nodes = DeviceNodes(devices, tree, driver=self.driver, mapping=mapping, pollers=self.effects.pollers,
                                 work=self.work, use=self.use, accesses=accesses,
                                 fast=self.fast if self.fast is not None else NoFastPath())
        self.fs = IpuFilesystem(devices, tree, nodes=self.nodes, view=SysfsView(devices, tree), mapping=mapping,
                                ownership=ownership or Ownership(), control_path="/run/test.ctl",
                                clock=lambda: 5 * 10**9)
        self.kernel = fk.FakeKernel(Session(self.fs, passthrough=passthrough))

    def as_process(self, pid: int, uid: int = 0) -> rq.Context:
        """The request context of thread ``pid`` of user ``uid`` (root)."""
        return rq.Context(uid, uid, pid)
