# Who may change an IPU while a process is attached (ipufs/driver/
# while_attached.py), through the fake kernel, with the callers' uids as the
# FUSE header carries them: under "exclusive" (the default) another user's
# process can read but not open for writing, and a file it opened for
# writing before the attach can no longer write registers, reset the IPU or
# send an ICU request that changes the board; root and the attached process
# can; "shared" lets everyone who may open the nodes change it.
from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import pytest

from ipufs.abi import ioctls as abi
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.abi.registers import REGISTERS
from ipufs.driver.devices import DeviceSet
from ipufs.fuse import requests as rq
from ipufs.model.profile import PROFILES
from tests.driver.rig import Rig
from tests.fuse import fakekernel as fk

APP, THREAD, OTHER, ADMIN = 100, 101, 200, 300  # the attached process, its thread, another process, root's
USER, STRANGER = 1000, 1001
SCRATCH = REGISTERS["SCRATCH"].offset
NODES = ("ipu0", "ipu0_ex", "ipu0_mailbox", "ipu0_mem")


def make_rig(while_attached: str) -> Rig:
    rig = Rig(DeviceSet(PROFILES["ipu1"], 2), while_attached=while_attached)
    rig.processes.spawn(APP, THREAD)
    rig.processes.spawn(OTHER)
    rig.processes.spawn(ADMIN)
    return rig


@pytest.fixture
def rig() -> Iterator[Rig]:
    rig = make_rig("exclusive")
    yield rig
    rig.devices.close()


def who(rig: Rig, pid: int) -> rq.Context:
    return rig.as_process(pid, {APP: USER, THREAD: USER, OTHER: STRANGER, ADMIN: 0}[pid])


def open_node(rig: Rig, name: str, pid: int, flags: int = os.O_RDWR) -> fk.Reply:
    node = rig.fs.tree.by_name(name)
    assert node is not None
    return rig.kernel.call(rq.Open, node.ino, flags, ctx=who(rig, pid))


def fh_of(reply: fk.Reply) -> int:
    assert reply.error == 0, reply
    return int.from_bytes(reply.payload[:8], "little")


def ioctl(rig: Rig, fh: int, name: str, pid: int, data: bytes = b"") -> fk.Reply:
    spec = abi.BY_NAME[name]
    enc = spec.encodings[0]
    data = data.ljust(enc.size, b"\0") if enc.direction & abi.Dir.WRITE else b""
    out = enc.size if enc.direction & abi.Dir.READ else 0
    return rig.kernel.call(rq.Ioctl, 2, fh, 0, enc.cmd(spec.nr), 0, memoryview(data), out, ctx=who(rig, pid))


def icu(op: Op) -> bytes:
    return MESSAGE.pack(op_word(op), 2 if op is Op.READ_IMAGE_VERSION else 0, 0, 0, 0)


def pwrite(rig: Rig, fh: int, pid: int, offset: int = SCRATCH, data: bytes = b"\x01\0\0\0") -> fk.Reply:
    return rig.kernel.call(rq.Write, 2, fh, offset, memoryview(data), 0, 0, ctx=who(rig, pid))


def attach(rig: Rig) -> int:
    fh = fh_of(open_node(rig, "ipu0", APP))
    assert ioctl(rig, fh, "ATTACH", APP).error == 0
    return fh


def test_another_users_process_may_read_but_not_open_for_writing(rig: Rig) -> None:
    attach(rig)
    for name in NODES:
        refused = open_node(rig, name, OTHER)
        assert refused.error == errno.EBUSY, name
        assert fh_of(open_node(rig, name, OTHER, os.O_RDONLY))
    ro = fh_of(open_node(rig, "ipu0", OTHER, os.O_RDONLY))
    assert rig.kernel.call(rq.Read, 2, ro, REGISTERS["VENDOR_ID"].offset, 4, 0, ctx=who(rig, OTHER)).error == 0
    # gc-info's queries of the ICU need no writable open; a request that changes the board does.
    assert ioctl(rig, ro, "MAILBOX_WRITE_READ", OTHER, icu(Op.READ_FIRMWARE_VERSION)).error == 0
    assert ioctl(rig, ro, "MAILBOX_WRITE_READ", OTHER, icu(Op.REBOOT)).error == errno.EBADF
    assert ioctl(rig, ro, "RESET", OTHER).error == errno.EBADF


def test_a_file_opened_for_writing_before_the_attach_can_change_nothing_after_it(rig: Rig) -> None:
    early = fh_of(open_node(rig, "ipu0", OTHER))
    mailbox = fh_of(open_node(rig, "ipu0_mailbox", OTHER))
    assert pwrite(rig, early, OTHER).error == 0  # nobody attached yet
    attach(rig)
    before = rig.devices.ipus[0].reset_count
    assert pwrite(rig, early, OTHER).error == errno.EBUSY
    assert pwrite(rig, mailbox, OTHER, 0x40).error == errno.EBUSY
    assert ioctl(rig, early, "RESET", OTHER).error == errno.EBUSY
    assert ioctl(rig, early, "MAILBOX_WRITE_READ", OTHER, icu(Op.CLEAR_STATUS)).error == errno.EBUSY
    assert ioctl(rig, early, "MAILBOX_WRITE_ONLY", OTHER, icu(Op.REBOOT)).error == errno.EBUSY
    assert ioctl(rig, early, "MAILBOX_WRITE_READ", OTHER, icu(Op.READ_TEMPERATURE)).error == 0
    assert rig.devices.ipus[0].reset_count == before
    # The other IPU is nobody's: the same file's peer there changes it.
    other_ipu = fh_of(open_node(rig, "ipu1", OTHER))
    assert ioctl(rig, other_ipu, "RESET", OTHER).error == 0


def test_the_attached_process_its_threads_and_root_change_the_ipu(rig: Rig) -> None:
    own = attach(rig)
    assert pwrite(rig, own, APP).error == 0 and pwrite(rig, own, THREAD).error == 0
    threads = fh_of(open_node(rig, "ipu0_ex", THREAD))
    assert pwrite(rig, threads, THREAD, 0).error == 0
    admin = fh_of(open_node(rig, "ipu0", ADMIN))
    assert pwrite(rig, admin, ADMIN).error == 0
    assert ioctl(rig, admin, "RESET", ADMIN).error == 0
    assert ioctl(rig, own, "RESET", APP).error == 0


def test_the_rule_ends_with_the_attachment(rig: Rig) -> None:
    early = fh_of(open_node(rig, "ipu0", OTHER))
    own = attach(rig)
    assert pwrite(rig, early, OTHER).error == errno.EBUSY
    rig.kernel.call(rq.Release, 2, own, 0, 0, ctx=who(rig, APP))  # its last file: detached
    assert rig.driver.attachments.get(0) is None
    assert pwrite(rig, early, OTHER).error == 0
    assert fh_of(open_node(rig, "ipu0_ex", OTHER))
    # A process that died is no holder, even before its exit is seen.
    attach(rig)
    rig.processes.processes[APP].alive = False
    assert fh_of(open_node(rig, "ipu0_ex", OTHER))


def test_shared_lets_everyone_who_may_open_the_nodes_change_the_ipu() -> None:
    rig = make_rig("shared")
    try:
        attach(rig)
        other = fh_of(open_node(rig, "ipu0", OTHER))
        assert pwrite(rig, other, OTHER).error == 0
        assert ioctl(rig, other, "RESET", OTHER).error == 0
        assert fh_of(open_node(rig, "ipu0_ex", OTHER))
    finally:
        rig.devices.close()
