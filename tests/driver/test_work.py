# Every way of acting on the device is one unit of work (ipufs/driver/
# work.py): whatever acts, the attached process has its signal by the time
# the action returns, and only a client's action marks the IPU busy. Each
# actor is tried in memory (tests/driver/rig.py); dropping the unit of work
# from any of them fails its case here.
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator

import pytest

from ipufs.abi import registers as R
from ipufs.abi.icu import MESSAGE, REQUEST_RING, Header, Op, op_word
from ipufs.abi.interrupts import FIRST_SIGNAL, Interrupt
from ipufs.daemon import faults
from ipufs.daemon.faults import FaultInjector, limits_of
from ipufs.driver.register_watcher import RegisterWatcher
from ipufs.driver.devices import DeviceSet
from ipufs.fuse import requests as rq
from ipufs.model.profile import PROFILES
from tests.driver.rig import Rig
from tests.driver.test_driver import ioctl, open_node, result

APP = 100
SYNC_ZONE = 4  # a GS1 zone of one IPU's own group: completes at once


@pytest.fixture
def rig() -> Iterator[Rig]:
    devices = DeviceSet(PROFILES["ipu1"], 1)
    rig = Rig(devices)
    rig.processes.spawn(APP)
    result(ioctl(rig, open_node(rig, "ipu0"), "ATTACH"))
    yield rig
    devices.close()


def _pwrite(rig: Rig, node: str, offset: int, data: bytes) -> None:
    fh = open_node(rig, node)
    reply = rig.kernel.call(rq.Write, rig.fs.tree.by_name(node).ino, fh, offset,  # type: ignore[union-attr]
                            memoryview(data), 0, os.O_RDWR, ctx=rig.as_process(APP))
    assert reply.error == 0, reply


def _icu_request(rig: Rig) -> None:
    request = MESSAGE.pack(op_word(Op.READ_CLOCK), 0, 0, 0, 0)
    result(ioctl(rig, open_node(rig, "ipu0_mailbox"), "MAILBOX_WRITE_ONLY", request))


def _mailbox_post(rig: Rig) -> None:
    """A request put in the ring, then the doorbell rung by pwrite."""
    _pwrite(rig, "ipu0_mailbox", REQUEST_RING, MESSAGE.pack(op_word(Op.READ_CLOCK), 0, 0, 0, 0))
    _pwrite(rig, "ipu0_mailbox", Header.REQUEST_HEAD, struct.pack("<I", 1))
    _pwrite(rig, "ipu0_mailbox", Header.DOORBELL, struct.pack("<I", 1))


def _faults(rig: Rig) -> tuple[FaultInjector, list[tuple[float, Callable[[], None]]]]:
    later: list[tuple[float, Callable[[], None]]] = []
    return FaultInjector(rig.devices, rig.work, lambda s, a: later.append((s, a)), on_fire=lambda f: None), later


def _inject(rig: Rig) -> None:
    injector, _ = _faults(rig)
    injector.apply(faults.parse({"kind": "exception", "ipu": 0}, limits_of(rig.devices)))


def _timer(rig: Rig) -> None:
    injector, later = _faults(rig)
    injector.apply(faults.parse({"kind": "icu-timeout", "ipu": 0, "for": 1}, limits_of(rig.devices)))
    rig.processes.signals.clear()
    (_, then), = later
    # An interrupt the model raised that nobody delivered yet: the timer's
    # unit of work delivers whatever is deliverable when it ends.
    rig.devices.ipus[0].raise_interrupt(Interrupt.ICU_DOORBELL)
    then()  # the timeout ends


def _watcher(rig: Rig) -> None:
    ipu = rig.devices.ipus[0]
    ipu.config.write(R.REGISTERS["CMD_SYNC"].offset, struct.pack("<I", SYNC_ZONE))  # a store through a mapping
    RegisterWatcher(rig.devices, rig.use, rig.work).act([0])


def _daemon_side(rig: Rig) -> None:
    rig.work.act(None, lambda: rig.devices.ipus[0].raise_exception(3))


#: Each actor, the signal it must have sent by the time it returns, and
#: whether it is a client's (so the IPU is busy after it).
ACTORS: dict[str, tuple[Callable[[Rig], None], Interrupt, bool]] = {
    "ioctl": (_icu_request, Interrupt.ICU_DOORBELL, True),
    "pwrite of a command register": (
        lambda rig: _pwrite(rig, "ipu0", R.REGISTERS["CMD_SYNC"].offset, struct.pack("<I", SYNC_ZONE)),
        Interrupt.GS1_E0, True),
    "pwrite of the mailbox doorbell": (_mailbox_post, Interrupt.ICU_DOORBELL, True),
    "fault": (_inject, Interrupt.EXCEPTION, False),
    "timer": (_timer, Interrupt.ICU_DOORBELL, False),
    "register watcher": (_watcher, Interrupt.GS1_E0, True),
    "daemon side (control, executor)": (_daemon_side, Interrupt.EXCEPTION, False),
}


@pytest.mark.parametrize("name", list(ACTORS))
def test_every_actor_delivers_its_signal_before_it_returns(rig: Rig, name: str) -> None:
    act, interrupt, client = ACTORS[name]
    rig.use.last.clear()
    act(rig)
    assert (APP, FIRST_SIGNAL + interrupt) in [(pid, signo) for pid, signo, _ in rig.processes.signals], name
    assert (0 in rig.use.last) == client, "only a client's action marks the IPU busy"
