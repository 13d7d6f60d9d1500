# The ioctls in the forms a runtime that drives a real C600 calls them
# (osmarks/ipu-stack, crates/ipu-driver/src/lib.rs), through the fake
# kernel: what the kernel carries (the first 8 bytes at the argument, for
# _IOWR size 8) and the argument value, the rest read in the caller's
# memory. tests/integration/test_c600_bringup.py does the same through a
# real mount.
from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator

import pytest

from ipufs.abi import ioctls as abi
from ipufs.abi.icu import MESSAGE
from ipufs.driver.devices import DeviceSet
from ipufs.fuse import requests as rq
from ipufs.model.host_memory import HostRangeError
from ipufs.model.profile import PROFILES
from tests.driver.rig import Events, Rig
from tests.driver.test_driver import APP, OTHER, open_node, result
from tests.fuse import fakekernel as fk


@pytest.fixture
def rig() -> Iterator[Rig]:
    devices = DeviceSet(PROFILES["ipu21"], 1)
    rig = Rig(devices, events=Events())
    rig.processes.spawn(APP)
    rig.processes.spawn(OTHER)
    yield rig
    devices.close()


def call(rig: Rig, fh: int, direction: int, nr: int, size: int, arg: int, *, pid: int = APP) -> fk.Reply:
    """An ioctl as the kernel hands it on: ``arg`` the argument value, and
    for _IOW/_IOWR the ``size`` bytes at it."""
    data = b""
    if direction & abi.Dir.WRITE:
        data = rig.driver.system.vm_read(pid, arg, size)
    out = size if direction & abi.Dir.READ else 0
    return rig.kernel.call(rq.Ioctl, 2, fh, 0, abi.ioc(direction, nr, size), arg, memoryview(data), out,
                           ctx=rig.as_process(pid))


def attached(rig: Rig) -> int:
    fh = open_node(rig, "ipu0")
    result(call(rig, fh, abi.Dir.READ_WRITE, 10, 0, 0))
    return fh


def test_buffer_attach_takes_the_callers_index_and_detach_takes_it_by_value(rig: Rig) -> None:
    app = rig.processes.processes[APP]
    app.map(0x10000, bytes(64))
    app.map(0x20000, abi.REAL_BUFFER.pack(5, 64, 0x10000))
    fh = attached(rig)
    assert result(call(rig, fh, abi.Dir.READ_WRITE, 11, 8, 0x20000)) == (0, b"")
    rig.driver.dma.write(0, 5, 4, b"hw")
    assert bytes(app.memory[0x10004 + i] for i in range(2)) == b"hw"
    assert call(rig, fh, abi.Dir.READ_WRITE, 11, 8, 0x20000).error == errno.EBUSY  # index 5 taken
    # ipufs's own form still assigns ids, around the indices callers chose
    app.map(0x30000, abi.BUFFER.pack(0x10000, 64, 0, 0))
    for _ in range(5):
        _, out = result(call(rig, fh, abi.Dir.READ_WRITE, 11, abi.BUFFER.size, 0x30000))
        assert abi.BUFFER.unpack(out)[2] != 5
    assert len(rig.driver.attachments.by_ipu[0].buffers) == 6
    result(call(rig, fh, abi.Dir.NONE, 12, 0, 5))  # BUFFER_DETACH 5, by value
    assert 5 not in rig.driver.attachments.by_ipu[0].buffers
    assert call(rig, fh, abi.Dir.NONE, 12, 0, 5).error == errno.EINVAL
    result(call(rig, fh, abi.Dir.NONE, 18, 0, 0))  # BUFFER_DETACH_ALL
    assert rig.driver.attachments.by_ipu[0].buffers == {}


@pytest.mark.parametrize("index,size,address,error", [
    (0, 0, 0x10000, errno.EINVAL),  # no bytes
    (0, 64, 0x90000, errno.EFAULT),  # not mapped by the caller
])
def test_buffer_attach_refuses_what_the_device_could_not_use(rig: Rig, index: int, size: int, address: int,
                                                             error: int) -> None:
    app = rig.processes.processes[APP]
    app.map(0x10000, bytes(64))
    app.map(0x20000, abi.REAL_BUFFER.pack(index, size, address))
    assert call(rig, attached(rig), abi.Dir.READ_WRITE, 11, 8, 0x20000).error == error


def test_mailbox_write_read_reads_the_request_and_writes_the_answer_where_the_pointers_say(rig: Rig) -> None:
    app = rig.processes.processes[APP]
    app.map(0x40000, MESSAGE.pack(0x4078020E, 0, 0, 0, 0))
    app.map(0x40100, bytes(20))
    app.map(0x40200, abi.MESSAGE_POINTERS.pack(0x40000, 0x40100))
    fh = attached(rig)
    assert result(call(rig, fh, abi.Dir.READ_WRITE, 31, 8, 0x40200)) == (0, b"")
    answer = MESSAGE.unpack(bytes(app.memory[0x40100 + i] for i in range(20)))
    assert answer[0] & 0xFFFF0000 == 0x40780000  # the runtime's check
    app.map(0x40200, abi.MESSAGE_POINTERS.pack(0x40000, 0x99000))  # the answer's place is not mapped
    assert call(rig, fh, abi.Dir.READ_WRITE, 31, 8, 0x40200).error == errno.EFAULT


def test_monitoring_gates_error_counting_and_utilisation_and_errors_accumulate(rig: Rig) -> None:
    fh = attached(rig)
    model = rig.devices.ipus[0]
    model.link_errors.add(2, 1.0)
    result(call(rig, fh, abi.Dir.NONE, 34, 0, 0))  # STOP_MONITORING
    model.link_errors.add(5, 2.0)
    model.set_utilisation(5000)
    assert (model.link_errors.total, model.utilisation) == (2, 0)
    result(call(rig, fh, abi.Dir.NONE, 35, 0, 0))  # START_MONITORING
    model.link_errors.add(1, 3.0)
    model.set_utilisation(5000)
    assert (model.link_errors.total, model.utilisation) == (3, 5000)
    result(call(rig, fh, abi.Dir.NONE, 36, 0, 0))  # ACCUMULATE_ERRORS
    assert model.monitoring.accumulated == 3
    model.link_errors.add(4, 4.0)
    result(call(rig, fh, abi.Dir.NONE, 36, 0, 0))
    result(call(rig, fh, abi.Dir.NONE, 36, 0, 0))  # nothing new: the total stays
    assert model.monitoring.accumulated == 7
    result(call(rig, fh, abi.Dir.NONE, 44, 0, 0))  # SET_HEXOPT_IDENTITY_TABLE
    readonly = rig.kernel.call(rq.Open, rig.fs.tree.by_name("ipu0").ino, os.O_RDONLY,  # type: ignore[union-attr]
                               ctx=rig.as_process(APP))
    ro = int.from_bytes(readonly.payload[:8], "little")
    assert call(rig, ro, abi.Dir.NONE, 34, 0, 0).error == errno.EBADF  # it changes the device
    assert model.monitoring.running


def test_set_secondary_ipu_id_reads_the_u32_it_points_at(rig: Rig) -> None:
    app = rig.processes.processes[APP]
    app.map(0x50000, struct.pack("<II", 0x1234, 0xFFFFFFFF))  # the u32, then bytes that are not its
    fh = attached(rig)
    result(call(rig, fh, abi.Dir.WRITE, 47, 8, 0x50000))
    assert rig.driver.attachments.by_ipu[0].secondary_ipu_id == 0x1234
    result(call(rig, fh, abi.Dir.NONE, 47, 0, 0))
    assert rig.driver.attachments.by_ipu[0].secondary_ipu_id == 0
    other = open_node(rig, "ipu0", OTHER)
    rig.processes.processes[OTHER].map(0x50000, bytes(8))
    assert call(rig, other, abi.Dir.WRITE, 47, 8, 0x50000, pid=OTHER).error == errno.EPERM


def test_host_packets_reach_the_buffers_end_to_end_in_attach_order(rig: Rig) -> None:
    app = rig.processes.processes[APP]
    app.map(0x10000, bytes(64))
    app.map(0x40000, bytes(64))
    app.map(0x20000, abi.REAL_BUFFER.pack(1, 64, 0x10000) + abi.REAL_BUFFER.pack(0, 64, 0x40000))
    memory = rig.driver.devices.ipus[0].execution.exchange.host.memory
    with pytest.raises(HostRangeError, match="no attached process"):
        memory.write(0, b"x")
    fh = attached(rig)
    for at in (0x20000, 0x20010):  # index 1 first: host offsets 0-63 are its, 64-127 index 0's
        result(call(rig, fh, abi.Dir.READ_WRITE, 11, 8, at))
    memory.write(60, b"abcdefgh")  # across the two
    assert bytes(app.memory[0x1003C + i] for i in range(4)) == b"abcd"
    assert bytes(app.memory[0x40000 + i] for i in range(4)) == b"efgh"
    assert memory.read(60, 8) == b"abcdefgh"
    with pytest.raises(HostRangeError, match="hold 128 bytes: none covers host offset 0x7c\\+8"):
        memory.read(124, 8)
