# Defects a hostile audit found in how the nodes behave, each checked
# through a real mount (docs/reliability.md): the interrupt mask belongs
# to the attached process on every path, a new owner starts unmasked,
# RESET clears INT_RAISED, closing every file detaches whatever order the
# kernel reports closes and opens in, read-only opens cannot change the
# device, no close waits on a hung daemon, and the small errnos.
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ipufs.abi import ioctls
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import REGISTERS
from tests.integration.harness import (LineClient, PyClient, RunningDaemon, daemon_process, stop_processes, suspend,
                                       wait_for)

pytestmark = pytest.mark.mount
INT_MASK = REGISTERS["INT_MASK"].offset
ALL = 0x3F


def attached(start: Callable[[int], PyClient], ipu: int = 0, ipu_id: int = 7) -> PyClient:
    c = start(ipu)
    assert c("attach") == "ok" and c(f"setid {ipu_id}") == "ok"
    return c


def raise_(board: RunningDaemon, source: Interrupt, ipu: int = 0) -> None:
    board.call(lambda: board.daemon.driver.raise_interrupt(ipu, source))


# --- the interrupt mask is the attached process's ------------------------------
def test_a_stranger_cannot_mask_by_pwrite_and_a_mapped_store_is_undone(
        board: RunningDaemon, py_client: Callable[[int], PyClient]) -> None:
    owner = attached(py_client)
    fd = os.open(board.path("ipu0"), os.O_RDWR)
    try:
        with pytest.raises(PermissionError):
            os.pwrite(fd, ALL.to_bytes(4, "little"), INT_MASK)
        with pytest.raises(PermissionError):  # a wider write covering it: nothing stored
            os.pwrite(fd, ALL.to_bytes(4, "little") * 2, INT_MASK)
        assert owner("reg INT_MASK") == "0"
        os.pwrite(fd, b"\0\0\0\0", INT_MASK)  # leaves the mask as it is: allowed
        raise_(board, Interrupt.GS1_E0)
        assert owner.signals(1) == [(46, 7)]
        # Through a mapping nobody can be told apart: the store is undone.
        m = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED)
        try:
            m[INT_MASK : INT_MASK + 4] = ALL.to_bytes(4, "little")
            assert wait_for(lambda: m[INT_MASK : INT_MASK + 4] == bytes(4), 2)
        finally:
            m.close()
        raise_(board, Interrupt.EXCEPTION)
        assert owner.signals(1) == [(44, 7)]
        # The owner's own pwrite sets it, and INT_MASK reads what is in force.
        assert owner(f"set INT_MASK {0xFFFF}") == "ok"
        assert owner("reg INT_MASK") == str(ALL)
        raise_(board, Interrupt.GS1_E0)
        assert owner.signals(1, 150) == []
    finally:
        os.close(fd)


def test_nobody_attached_nobody_masks(board: RunningDaemon) -> None:
    fd = os.open(board.path("ipu1"), os.O_RDWR)
    try:
        with pytest.raises(PermissionError):
            os.pwrite(fd, (4).to_bytes(4, "little"), INT_MASK)
        assert os.pread(fd, 4, INT_MASK) == bytes(4)
    finally:
        os.close(fd)


def test_a_new_owner_starts_unmasked(board: RunningDaemon, py_client: Callable[[int], PyClient]) -> None:
    first = attached(py_client)
    assert first("mask 63") == "63"
    assert first(f"set INT_MASK {ALL}") == "ok"
    first.close()
    assert wait_for(lambda: board.daemon.driver.attachments.get(0) is None, 2)
    second = attached(py_client, ipu_id=9)
    assert second("reg INT_MASK") == "0" and second("reg INT_PENDING") == "0"
    assert second("set CMD_SYNC 4") == "ok"  # a register write polls the registers: the old mask stays gone
    assert second.signals(1) == [(46, 9)]


def test_reset_clears_int_raised(board: RunningDaemon, py_client: Callable[[int], PyClient]) -> None:
    owner = attached(py_client)
    raise_(board, Interrupt.GS1_E0)
    assert owner.signals(1) == [(46, 7)]
    assert owner("reg INT_RAISED") == str(Interrupt.GS1_E0.bit)
    assert owner("reset") == "ok"
    assert owner("reg INT_RAISED") == "0"


# --- attachments end with the last file ---------------------------------------------
CLOSE_ALL_THEN_REOPEN = textwrap.dedent("""
    import fcntl, os, sys
    root, attach, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    names = ["ipu0", "ipu0_ex", "ipu0_mailbox", "ipu0_mem"]
    for _ in range(rounds):
        fds = [os.open(f"{root}/{names[i % 4]}", os.O_RDWR) for i in range(32)]
        fcntl.ioctl(fds[0], attach)
        for fd in fds:
            os.close(fd)
        again = os.open(f"{root}/ipu0", os.O_RDWR)  # not attached through
        print("reopened", flush=True)
        sys.stdin.readline()
        os.close(again)
""")


def test_closing_every_file_detaches_even_when_a_reopen_overtakes_the_releases(board: RunningDaemon) -> None:
    rounds = 10
    proc = subprocess.Popen([sys.executable, "-c", CLOSE_ALL_THEN_REOPEN, str(board.mountpoint),
                             str(ioctls.BY_NAME["ATTACH"].cmd), str(rounds)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for _ in range(rounds):
            assert proc.stdout.readline().strip() == "reopened"
            assert wait_for(lambda: board.daemon.driver.attachments.get(0) is None, 2)
            proc.stdin.write("\n")
            proc.stdin.flush()
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.communicate()


def test_a_file_opened_after_attaching_does_not_hold_the_attachment(board: RunningDaemon) -> None:
    attach = ioctls.BY_NAME["ATTACH"].cmd
    first = os.open(board.path("ipu2"), os.O_RDWR)
    fcntl.ioctl(first, attach)
    later = os.open(board.path("ipu2_mailbox"), os.O_RDWR)
    try:
        os.close(first)
        assert wait_for(lambda: board.daemon.driver.attachments.get(2) is None, 2)
    finally:
        os.close(later)


# --- read-only opens ---------------------------------------------------------------
def test_a_read_only_open_cannot_change_the_device(board: RunningDaemon) -> None:
    fd = os.open(board.path("ipu3"), os.O_RDONLY)
    reboot = MESSAGE.pack(op_word(Op.REBOOT), 0, 0, 0, 0)
    query = MESSAGE.pack(op_word(Op.READ_HARDWARE_ID), 0, 0, 0, 0)
    try:
        for name, arg in (("ATTACH", 0), ("RESET", b"\0" * 4), ("MAILBOX_WRITE_ONLY", reboot),
                          ("MAILBOX_WRITE_READ", reboot), ("MASK_INTERRUPT", b"\0" * 8),
                          ("SET_IPU_ID", 3)):
            with pytest.raises(OSError) as info:
                fcntl.ioctl(fd, ioctls.BY_NAME[name].cmd, arg)
            assert info.value.errno == errno.EBADF, name
        assert board.daemon.devices.ipus[3].reset_count == 0
        assert board.daemon.driver.attachments.get(3) is None
        # Reading the rings' layout and the count of waiting answers is fine,
        # and so is asking the ICU what only reads the board (gc-info's queries).
        fcntl.ioctl(fd, ioctls.BY_NAME["MAILBOX_GET_OFFSETS"].cmd, b"\0" * 8)
        assert fcntl.ioctl(fd, ioctls.ioc(ioctls.Dir.READ, 29, 8), b"\0" * 8) == bytes(8)
        assert fcntl.ioctl(fd, ioctls.BY_NAME["MAILBOX_WRITE_READ"].cmd, query) != query
    finally:
        os.close(fd)
    fd = os.open(board.path("ipu3"), os.O_RDWR)
    try:
        fcntl.ioctl(fd, ioctls.BY_NAME["RESET"].cmd, b"\0" * 4)
        assert board.daemon.devices.ipus[3].reset_count == 1
    finally:
        os.close(fd)


# --- small errnos --------------------------------------------------------------------
def test_long_names_and_ioctls_on_the_root(board: RunningDaemon) -> None:
    assert os.statvfs(board.mountpoint).f_namemax == 255
    with pytest.raises(OSError) as info:
        os.open(board.path("a" * 256), os.O_RDONLY)
    assert info.value.errno == errno.ENAMETOOLONG
    with pytest.raises(FileNotFoundError):
        os.open(board.path("a" * 255), os.O_RDONLY)
    root = os.open(board.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as info:
            fcntl.ioctl(root, ioctls.BY_NAME["ATTACH"].cmd)
        assert info.value.errno == errno.ENOTTY
    finally:
        os.close(root)


def test_si_pid_is_zero_where_the_daemon_is_not_in_the_pid_namespace(board: RunningDaemon) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("util-linux unshare is not installed")
    script = Path(__file__).with_name("py_client.py")
    inside = LineClient(["unshare", "--pid", "--fork", sys.executable, str(script), str(board.mountpoint), "1"],
                        "ready")
    outside = LineClient([sys.executable, str(script), str(board.mountpoint), "2"], "ready")
    try:
        for c in (inside, outside):
            assert c.ask("attach") == "ok"
        raise_(board, Interrupt.GS1_E0, 1)
        raise_(board, Interrupt.GS1_E0, 2)
        assert inside.ask("senders 1 2000") == "senders 0"
        assert outside.ask("senders 1 2000") == f"senders {os.getpid()}"
    finally:
        inside.close("quit")
        outside.close("quit")


# --- a hung daemon --------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import os, sys
    fd = os.open(sys.argv[1] + "/ipu0", os.O_RDWR)
    print("opened", flush=True)
    sys.stdin.readline()
    os.close(fd)
    print("closed", flush=True)
    sys.stdin.readline()
    try:
        os.pwrite(os.open(sys.argv[1] + "/ipu0", os.O_RDWR), b"x", 0x10C)
    except OSError as exc:
        print(exc.errno, flush=True)
""")


def test_the_first_close_does_not_wait_on_a_hung_daemon(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    daemon = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    holder = None
    try:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(mnt)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "opened"  # the connection's first file
        suspend(daemon.pid)
        holder.stdin.write("\n")
        holder.stdin.flush()
        started = time.monotonic()
        assert holder.stdout.readline().strip() == "closed"
        assert time.monotonic() - started < 2
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
        stop_processes(mnt, holder, daemon)


PWRITER = textwrap.dedent("""
    import os, sys
    fd = os.open(sys.argv[1] + "/ipu0", os.O_RDWR)
    print("opened", flush=True)
    sys.stdin.readline()
    for _ in range(2):
        try:
            os.pwrite(fd, b"\\1\\0\\0\\0", 0x10C)
            print("written", flush=True)
        except OSError as exc:
            print(exc.errno, flush=True)
""")


def test_a_pwrite_in_flight_when_the_daemon_dies_gets_econnaborted_then_enotconn(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    daemon = daemon_process(mnt, "--ipus", "1", "--profile", "ipu1", "--no-link-dev")
    writer = None
    try:
        writer = subprocess.Popen([sys.executable, "-c", PWRITER, str(mnt)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().strip() == "opened"
        suspend(daemon.pid)
        writer.stdin.write("\n")
        writer.stdin.flush()
        time.sleep(0.3)  # the pwrite now waits on the stopped daemon
        daemon.kill()
        daemon.wait(10)
        assert writer.stdout.readline().strip() == str(errno.ECONNABORTED)
        assert writer.stdout.readline().strip() == str(errno.ENOTCONN)
    finally:
        stop_processes(mnt, writer, daemon)
