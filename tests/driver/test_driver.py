# The driver personality without root and without real processes: opens,
# the 0xED ioctls, attachments, signals and DMA, driven through the fake
# kernel with fake system calls (tests/driver/rig.py). The integration
# tests check the same against a real mount and real processes.
from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator

import pytest

from ipufs.abi import ioctls as abi
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.abi.interrupts import FIRST_SIGNAL, Interrupt
from ipufs.driver.devices import DeviceSet
from ipufs.driver.dma import DmaError
from ipufs.driver.driver import IOCTL_ROLES
from ipufs.fuse import requests as rq
from ipufs.model.profile import PROFILES
from tests.driver.rig import Events, Rig
from tests.fuse import fakekernel as fk

APP, THREAD, OTHER = 100, 101, 200  # a client process, one of its threads, another process


@pytest.fixture
def rig() -> Iterator[Rig]:
    devices = DeviceSet(PROFILES["ipu1"], 2)
    rig = Rig(devices, events=Events())
    rig.processes.spawn(APP, THREAD)
    rig.processes.spawn(OTHER)
    yield rig
    devices.close()


def open_node(rig: Rig, name: str, pid: int = APP) -> int:
    nodeid = rig.fs.tree.by_name(name)
    assert nodeid is not None
    reply = rig.kernel.call(rq.Open, nodeid.ino, os.O_RDWR, ctx=rig.as_process(pid))
    assert reply.error == 0, reply
    return int.from_bytes(reply.payload[:8], "little")


def ioctl(rig: Rig, fh: int, name: str, arg: bytes | int = b"", *, pid: int = APP,
          encoding: int = 0) -> fk.Reply:
    spec = abi.BY_NAME[name]
    enc = spec.encodings[encoding]
    data = arg if isinstance(arg, bytes) else b""
    value = arg if isinstance(arg, int) else 0
    if enc.direction & abi.Dir.WRITE:
        data = data.ljust(enc.size, b"\0")
    else:
        data = b""
    out = enc.size if enc.direction & abi.Dir.READ else 0
    return rig.kernel.call(rq.Ioctl, 2, fh, 0, enc.cmd(spec.nr), value, memoryview(data), out,
                           ctx=rig.as_process(pid))


def result(reply: fk.Reply) -> tuple[int, bytes]:
    assert reply.error == 0, errno.errorcode.get(reply.error)
    res, _, _, _ = struct.unpack_from("<iIII", reply.payload)
    return res, reply.payload[16:]


def test_every_ioctl_of_the_abi_has_a_handler_and_a_caller_rule() -> None:
    assert set(IOCTL_ROLES) == set(abi.IOCTLS)
    assert {s.name for s, role in IOCTL_ROLES.items() if role.caller_matters} == {
        "ATTACH", "ATTACH_BUFFER", "DETACH_BUFFER", "BUFFER_DETACH_ALL", "SET_IPU_ID", "MASK_INTERRUPT",
        "UNMASK_INTERRUPT", "SET_SECONDARY_IPU_ID"}


class Counting:
    """A fault plan's access counter, counting."""

    counting = True

    def count(self, ipu: int) -> None:
        pass


def test_the_ioctls_that_leave_running_tiles_running_are_served_without_stopping_them(rig: Rig) -> None:
    # Only what touches the driver's state, or the model's that tiles never see.
    assert {s.name for s, role in IOCTL_ROLES.items() if role.leaves_tiles} == {
        "SET_IPU_ID", "SET_SECONDARY_IPU_ID", "STOP_MONITORING", "START_MONITORING", "ACCUMULATE_ERRORS",
        "SET_HEXOPT_IDENTITY_TABLE", "MAILBOX_READ_ONLY", "MAILBOX_GET_OFFSETS"}
    ctx = rq.Context(0, 0, APP)

    def message(r: rq.Request) -> memoryview:
        return memoryview(fk.encode(r))

    def ioctl_message(cmd: int) -> memoryview:
        return message(rq.Ioctl(1, 2, ctx, 1, 0, cmd, 0, memoryview(b""), 0))

    for spec in abi.IOCTLS:  # every form a caller may use, as the kernel sends it
        for enc in spec.encodings:
            assert rig.fs.leaves_tiles(ioctl_message(enc.cmd(spec.nr))) == IOCTL_ROLES[spec].leaves_tiles, spec.name
    set_id = abi.BY_NAME["SET_IPU_ID"]
    quiet = ioctl_message(set_id.encodings[0].cmd(set_id.nr))
    assert not rig.fs.leaves_tiles(quiet[:60])  # cut short: not an ioctl to go by
    assert not rig.fs.leaves_tiles(ioctl_message(0x1234_5678))  # another driver's
    assert not rig.fs.leaves_tiles(message(rq.Getattr(1, 2, ctx, None)))
    counted = Rig(rig.devices, accesses=Counting())  # a fault plan counts requests: it may act on the tiles
    assert not counted.fs.leaves_tiles(quiet)
    assert rig.fs.leaves_tiles(quiet)
    rig.driver.raise_interrupt(0, Interrupt.GS1_E0)  # a signal to go: its process gone, delivering detaches it
    assert rig.devices.deliverable and not rig.fs.leaves_tiles(quiet)
    rig.effects.deliver()
    assert rig.fs.leaves_tiles(quiet)
    rig.fs.mapping.fall_back("a test")  # page-cache mode: an ioctl first carries out the stores mapped before it
    assert not rig.fs.leaves_tiles(quiet)


def test_attach_from_a_thread_attaches_its_process_and_signals_carry_the_id(rig: Rig) -> None:
    fh = open_node(rig, "ipu0", pid=THREAD)
    result(ioctl(rig, fh, "ATTACH", pid=THREAD))
    att = rig.driver.attachments.get(0)
    assert att is not None and att.pid == APP and att.handles == {fh}
    assert list(rig.exits.watched) == [att.pidfd]
    result(ioctl(rig, fh, "SET_IPU_ID", 7, pid=THREAD))
    rig.driver.raise_interrupt(0, Interrupt.GS1_E0)
    rig.effects.deliver()
    assert rig.processes.signals == [(APP, FIRST_SIGNAL + Interrupt.GS1_E0, 7)]
    assert rig.driver.signals.sent[0][Interrupt.GS1_E0] == 1
    assert "attach" in rig.events.kinds() and "signal" in rig.events.kinds()  # type: ignore[attr-defined]


def test_a_second_process_is_refused_while_the_first_lives(rig: Rig) -> None:
    result(ioctl(rig, open_node(rig, "ipu0"), "ATTACH"))
    assert ioctl(rig, open_node(rig, "ipu0", OTHER), "ATTACH", pid=OTHER).error == errno.EBUSY
    rig.processes.processes[APP].alive = False  # dead, its exit not yet seen
    result(ioctl(rig, open_node(rig, "ipu0", OTHER), "ATTACH", pid=OTHER))
    att = rig.driver.attachments.get(0)
    assert att is not None and att.pid == OTHER


def test_only_the_attached_process_may_set_its_id_mask_or_attach_buffers(rig: Rig) -> None:
    result(ioctl(rig, open_node(rig, "ipu0"), "ATTACH"))
    fh = open_node(rig, "ipu0", OTHER)
    for name, arg in (("SET_IPU_ID", 3), ("MASK_INTERRUPT", b"\x01"), ("ATTACH_BUFFER", b"")):
        assert ioctl(rig, fh, name, arg, pid=OTHER).error == errno.EPERM, name


def test_a_caller_that_is_gone_gets_esrch(rig: Rig) -> None:
    fh = open_node(rig, "ipu0")
    assert ioctl(rig, fh, "ATTACH", pid=999).error == errno.ESRCH


def test_the_process_exit_detaches_and_the_pidfd_is_handed_back(rig: Rig) -> None:
    result(ioctl(rig, open_node(rig, "ipu0"), "ATTACH"))
    att = rig.driver.attachments.get(0)
    assert att is not None
    pidfd = att.pidfd
    rig.exits.exit(APP)
    assert rig.driver.attachments.get(0) is None
    assert rig.exits.unwatched == [pidfd]
    assert ("detach", 0) in [(e.kind, e.ipu) for e in rig.events.seen]  # type: ignore[attr-defined]


def test_closing_the_last_file_detaches(rig: Rig) -> None:
    first, second = open_node(rig, "ipu0"), open_node(rig, "ipu0_mailbox")
    result(ioctl(rig, first, "ATTACH"))
    assert rig.kernel.call(rq.Release, 2, first, 0, 0).error == 0
    assert rig.driver.attachments.get(0) is not None  # the mailbox still holds it
    assert rig.kernel.call(rq.Release, 4, second, 0, 0).error == 0
    assert rig.driver.attachments.get(0) is None
    assert rig.fs.files == {}


def test_a_signal_to_a_process_gone_meanwhile_is_dropped_and_detaches(rig: Rig) -> None:
    result(ioctl(rig, open_node(rig, "ipu0"), "ATTACH"))
    rig.processes.processes[APP].alive = False
    rig.driver.raise_interrupt(0, Interrupt.EXCEPTION)
    rig.effects.deliver()
    assert rig.processes.signals == []
    assert rig.driver.signals.dropped[0][Interrupt.EXCEPTION] == 1
    assert rig.driver.attachments.get(0) is None


def test_masked_sources_wait_and_unmasking_delivers_them(rig: Rig) -> None:
    fh = open_node(rig, "ipu0")
    result(ioctl(rig, fh, "ATTACH"))
    _, mask = result(ioctl(rig, fh, "MASK_INTERRUPT", Interrupt.GS2_E0.bit.to_bytes(8, "little")))
    assert int.from_bytes(mask, "little") == Interrupt.GS2_E0.bit
    rig.driver.raise_interrupt(0, Interrupt.GS2_E0)
    rig.effects.deliver()
    assert rig.processes.signals == []
    result(ioctl(rig, fh, "UNMASK_INTERRUPT", Interrupt.GS2_E0.bit.to_bytes(8, "little")))
    assert rig.processes.signals == [(APP, FIRST_SIGNAL + Interrupt.GS2_E0, 0)]
    assert ioctl(rig, fh, "MASK_INTERRUPT", (1 << 40).to_bytes(8, "little")).error == errno.EINVAL


def test_buffers_take_mapped_memory_and_carry_dma_both_ways(rig: Rig) -> None:
    app = rig.processes.processes[APP]
    app.map(0x10000, bytes(64))
    fh = open_node(rig, "ipu1")
    result(ioctl(rig, fh, "ATTACH"))
    _, out = result(ioctl(rig, fh, "ATTACH_BUFFER", abi.BUFFER.pack(0x10000, 64, 0, 0)))
    buffer_id = abi.BUFFER.unpack(out)[2]
    rig.driver.dma.write(1, buffer_id, 8, b"DMA")
    assert bytes(app.memory[0x10008 + i] for i in range(3)) == b"DMA"
    assert rig.driver.dma.read(1, buffer_id, 8, 3) == b"DMA"
    with pytest.raises(DmaError, match="outside"):
        rig.driver.dma.read(1, buffer_id, 62, 4)
    assert ioctl(rig, fh, "ATTACH_BUFFER", abi.BUFFER.pack(0x90000, 64, 0, 0)).error == errno.EFAULT
    result(ioctl(rig, fh, "DETACH_BUFFER", buffer_id.to_bytes(8, "little")))
    assert ioctl(rig, fh, "DETACH_BUFFER", buffer_id.to_bytes(8, "little")).error == errno.EINVAL
    with pytest.raises(DmaError, match="no buffer"):
        rig.driver.dma.write(1, buffer_id, 0, b"x")


def test_the_mailbox_ioctls_serve_any_process_with_a_node_open(rig: Rig) -> None:
    fh = open_node(rig, "ipu0_mailbox", OTHER)
    request = MESSAGE.pack(op_word(Op.READ_FIRMWARE_VERSION, 0), 0, 0, 0, 0)
    _, answer = result(ioctl(rig, fh, "MAILBOX_WRITE_READ", request, pid=OTHER))
    assert len(answer) == MESSAGE.size and answer != request  # answered in place
    result(ioctl(rig, fh, "MAILBOX_WRITE_ONLY", request, pid=OTHER))
    _, waiting = result(ioctl(rig, fh, "MAILBOX_READ_ONLY", pid=OTHER, encoding=2))
    assert int.from_bytes(waiting, "little") == 1
    _, queued = result(ioctl(rig, fh, "MAILBOX_READ_ONLY", pid=OTHER))
    assert queued == answer
    _, waiting = result(ioctl(rig, fh, "MAILBOX_READ_ONLY", pid=OTHER, encoding=2))
    assert int.from_bytes(waiting, "little") == 0
    assert ioctl(rig, fh, "MAILBOX_READ_ONLY", pid=OTHER).error == errno.EAGAIN


def test_an_unknown_ioctl_is_enotty_and_a_size_a_known_one_cannot_take_einval(rig: Rig) -> None:
    fh = open_node(rig, "ipu0")
    assert rig.kernel.call(rq.Ioctl, 2, fh, 0, abi.ioc(abi.Dir.NONE, 99, 0), 0, memoryview(b""), 0).error \
        == errno.ENOTTY
    short = abi.ioc(abi.Dir.WRITE, abi.BY_NAME["MAILBOX_WRITE_ONLY"].nr, 4)
    assert rig.kernel.call(rq.Ioctl, 2, fh, 0, short, 0, memoryview(bytes(4)), 0).error == errno.EINVAL
    # ATTACH takes any size: its argument is ignored.
    any_size = abi.ioc(abi.Dir.READ, abi.BY_NAME["ATTACH"].nr, 4)
    assert rig.kernel.call(rq.Ioctl, 2, fh, 0, any_size, 0, memoryview(b""), 4, ctx=rig.as_process(APP)).error == 0


def test_a_read_only_open_may_read_the_mailbox_but_not_change_the_device(rig: Rig) -> None:
    node = rig.fs.tree.by_name("ipu0_mailbox")
    assert node is not None
    reply = rig.kernel.call(rq.Open, node.ino, os.O_RDONLY, ctx=rig.as_process(APP))
    fh = int.from_bytes(reply.payload[:8], "little")
    result(ioctl(rig, fh, "MAILBOX_GET_OFFSETS"))
    assert ioctl(rig, fh, "RESET").error == errno.EBADF


def test_daemon_stop_detaches_everyone(rig: Rig) -> None:
    result(ioctl(rig, open_node(rig, "ipu0"), "ATTACH"))
    result(ioctl(rig, open_node(rig, "ipu1", OTHER), "ATTACH", pid=OTHER))
    rig.driver.close()
    assert len(rig.driver.attachments) == 0 and len(rig.exits.unwatched) == 2
