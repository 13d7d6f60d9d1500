# Faults, fault plans and the control handlers without root: driven through
# the driver stack in memory (tests/driver/rig.py), with a fake attached
# process whose signals are recorded. Written against their public
# behaviour: what a fault does to the device and the attached process,
# what a plan fires on which access, what the control channel answers.
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator

import pytest

from ipufs.abi import ioctls as abi
from ipufs.abi.interrupts import FIRST_SIGNAL, Interrupt
from ipufs.daemon import faults
from ipufs.daemon.control.operations import DeviceSide, StatusQueries
from ipufs.daemon.control.peers import ControlRights, Peer
from ipufs.daemon.control.protocol import answer
from ipufs.daemon.faults import Fault, FaultInjector, limits_of
from ipufs.daemon.plan import FaultPlan
from ipufs.daemon.plan_runner import PlanRunner
from ipufs.daemon.timers import Timers
from ipufs.daemon.utilisation import Utilisation
from ipufs.daemon.trace import Tracer
from ipufs.driver.devices import DeviceSet
from ipufs.fuse import requests as rq
from ipufs.model.profile import PROFILES
from tests.driver.rig import Rig

APP = 100


class Board:
    """Two IPUs in memory, a process attached to IPU 0, the device side."""

    def __init__(self, devices: DeviceSet) -> None:
        self.timers = Timers(lock=threading.RLock())
        self.fired: list[Fault] = []
        self.later: list[tuple[float, Callable[[], None]]] = []
        self.plans: PlanRunner | None = None
        self.rig = Rig(devices, accesses=self)
        self.injector = FaultInjector(devices, self.rig.work, lambda s, a: self.later.append((s, a)),
                                      on_fire=self.fired.append)
        self.plans = PlanRunner(self.injector, self.timers)
        self.rig.processes.spawn(APP)
        fh = self.open("ipu0")
        attach = abi.BY_NAME["ATTACH"].cmd
        reply = self.rig.kernel.call(rq.Ioctl, 2, fh, 0, attach, 0, memoryview(b""), 0, ctx=rq.Context(0, 0, APP))
        assert reply.error == 0
        self.tracer = Tracer()
        self.side = DeviceSide(devices, self.tracer, self.injector, self.plans, lock=threading.RLock(),
                               rights=ControlRights(None, self.rig.driver, self.rig.processes.calls(), daemon_uid=0))
        utilisation = Utilisation(devices.profile.tiles, len(devices.ipus), self.rig.driver.attachments.session)
        self.status = StatusQueries(devices, self.rig.driver, utilisation, lambda: self.rig.fs.mode, lambda: 42,
                                    self.rig.processes.calls())
        self.limits = limits_of(devices)

    # The filesystem's access counter, handed on to the plan runner.
    @property
    def counting(self) -> bool:
        return self.plans is not None and self.plans.counting

    def count(self, ipu: int) -> None:
        assert self.plans is not None
        self.plans.count(ipu)

    def open(self, name: str) -> int:
        node = self.rig.fs.tree.by_name(name)
        assert node is not None
        reply = self.rig.kernel.call(rq.Open, node.ino, os.O_RDWR, ctx=rq.Context(0, 0, APP))
        assert reply.error == 0
        return int.from_bytes(reply.payload[:8], "little")

    def signals(self) -> list[int]:
        return [signo - FIRST_SIGNAL for _, signo, _ in self.rig.processes.signals]

    def control(self, op: str, peer: Peer = Peer(1, 0, 0), **arguments: object) -> dict[str, object]:
        """The answer to a control request of ``peer`` (default: root's)."""
        operations = {o.name: o for o in self.status.operations() + self.side.operations()}
        line = json.dumps({"op": op, **arguments}).encode()
        reply: dict[str, object] = json.loads(answer(operations, line, self.limits, peer))
        return reply


@pytest.fixture
def board() -> Iterator[Board]:
    devices = DeviceSet(PROFILES["ipu1"], 2)
    yield Board(devices)
    devices.close()


def test_an_injected_exception_holds_in_the_model_and_signals_the_attached_process(board: Board) -> None:
    board.injector.apply(faults.parse({"kind": "exception", "ipu": 0, "cause": "misaligned", "tile": 3}, board.limits))
    model = board.rig.devices.ipus[0]
    assert model.exception is not None and model.exception.tile == 3
    assert board.signals() == [Interrupt.EXCEPTION]
    assert [f.kind.name for f in board.fired] == ["exception"]


def test_a_fault_on_an_ipu_nobody_attached_is_counted_as_dropped(board: Board) -> None:
    board.injector.apply(faults.parse({"kind": "interrupt", "ipu": 1, "source": "gs1_e0"}, board.limits))
    assert board.signals() == []
    assert board.rig.driver.signals.dropped[1][Interrupt.GS1_E0] == 1


def test_an_icu_timeout_ends_when_its_time_is_up(board: Board) -> None:
    board.injector.apply(faults.parse({"kind": "icu-timeout", "ipu": 0, "for": 2}, board.limits))
    icu = board.rig.devices.ipus[0].icu
    assert icu.unresponsive and [s for s, _ in board.later] == [2]
    board.later[0][1]()
    assert not icu.unresponsive


def test_a_plan_fires_on_the_access_it_names_and_logs_it(board: Board) -> None:
    assert board.plans is not None
    board.plans.start(FaultPlan.parse(
        'seed = 3\n[[fault]]\nkind = "interrupt"\nipu = 0\nsource = "gs1_e0"\nafter = 3\n', board.limits))
    for _ in range(4):
        board.open("ipu0_mailbox")  # each open is an access to IPU 0
    assert board.signals() == [Interrupt.GS1_E0]
    assert board.control("plan-log")["log"] == [[0, 3, "interrupt ipu=0 source=gs1_e0 stamp=False"]]


def test_a_timed_fault_waits_for_the_timers_and_a_new_plan_cancels_it(board: Board) -> None:
    assert board.plans is not None
    board.plans.start(FaultPlan.parse('[[fault]]\nkind = "link-down"\nipu = 0\nat = 0.5\n', board.limits))
    pending = list(board.timers._pending)
    assert [s for s, _ in pending] == [0.5]
    board.plans.start(FaultPlan.parse("", board.limits))  # replaced before it fired
    pending[0][1]()
    assert not board.rig.devices.ipus[0].link_down


def test_control_status_and_inject_answer_as_documented(board: Board) -> None:
    status = board.control("status")
    assert status["ok"] and status["requests"] == 42 and status["mode"] == "passthrough"
    ipus = status["ipus"]
    assert isinstance(ipus, list) and ipus[0]["attached"]["pid"] == APP
    fired = board.control("inject", kind="sync", ipu=0, zone="gs1")
    assert fired == {"ok": True, "fired": "sync ipu=0 arrive=False zone=gs1"}
    assert board.signals() == [Interrupt.GS1_E0]
    assert board.control("inject", kind="nothing")["ok"] is False
    assert board.control("ipu", ipu=7) == {"ok": False, "error": "ipu must be an integer 0..1, got 7"}
    loaded = board.control("plan", toml='seed = 5\n[[fault]]\nkind = "reset"\nipu = 1\nevery = 2\n')
    assert loaded == {"ok": True, "faults": 1, "seed": 5}
    assert board.control("plan", toml="[[fault]]\nkind = 3\n")["ok"] is False
