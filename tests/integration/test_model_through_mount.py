# The IPU model as a host program sees it through a real mount: registers
# by pread and through a mapping, the TDI, exceptions and parity with
# signal 44, the ICU by ioctl and through the mailbox rings with signal 45
# and poll, syncs with signals 46..49 (GS2 across a whole board), reset.
from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from ipufs.abi.icu import ERROR_MARKER, Op, op_word
from ipufs.abi.registers import REGISTERS, ExceptionCause
from ipufs.model.debug import TdiRegister
from tests.integration.harness import PyClient as Client
from tests.integration.harness import RunningDaemon, wait_for

pytestmark = [pytest.mark.mount, pytest.mark.uring]


@pytest.fixture
def client(py_client: Callable[[int], Client]) -> Callable[[int], Client]:
    return py_client


def attached(start: Callable[[int], Client], ipu: int, ipu_id: int) -> Client:
    c = start(ipu)
    assert c("attach") == "ok" and c(f"setid {ipu_id}") == "ok"
    return c


def pread_reg(board: RunningDaemon, ipu: int, name: str) -> int:
    fd = os.open(board.path(f"ipu{ipu}"), os.O_RDONLY)
    try:
        return int.from_bytes(os.pread(fd, 4, REGISTERS[name].offset), "little")
    finally:
        os.close(fd)


def test_identity_through_pread(board: RunningDaemon) -> None:
    assert [pread_reg(board, 2, n) for n in ("VENDOR_ID", "DEVICE_ID", "ARCH", "TILE_COUNT", "BOARD_TYPE",
                                             "BOARD_IPU_INDEX", "GROUP_SIZE", "TILE_WINDOW")] == [
        0x1D95, 4, 2, 1472, 2, 2, 4, 0x100000]


def test_misaligned_tdi_access_signals_an_exception(client: Callable[[int], Client]) -> None:
    c = attached(client, 1, 21)
    # ipu2's tile memory starts at 0x4c000 (the C600's)
    assert c("tdi-mem-write 3 0x4c010 0x1122334455667788 8") == "OK"
    assert c("tdi-mem-read 3 0x4c014 4") == f"OK {0x11223344}"
    assert c("tdi-mem-read 9 0x4c006 4").split()[0] == "MISALIGNED"
    assert c.signals(1) == [(44, 21)]
    assert [c(f"reg {n}") for n in ("EXC_STATUS", "EXC_CAUSE", "EXC_TILE", "EXC_ADDRESS")] == [
        "1", str(ExceptionCause.MISALIGNED), "9", str(0x4C006)]
    assert c("set CMD_EXC_CLEAR 1") == "ok" and c("reg EXC_STATUS") == "0"


def test_dbg_iexec_of_no_instruction_is_unsupported(client: Callable[[int], Client]) -> None:
    c = client(0)
    assert c(f"tdi-reg-write 5 {TdiRegister.DBG_IOWNER} 1") == "OK"  # an inactive worker takes injections
    assert c(f"tdi-reg-write 5 {TdiRegister.DBG_IEXEC} 0xdead") == "UNSUPPORTED"
    result, value = c(f"tdi-reg-read 5 {TdiRegister.TDI_STS}").split()
    assert result == "OK" and int(value) & 2  # TDI_STS.INV


def test_parity_fault_then_reset(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    c = attached(client, 0, 5)
    ipu = board.daemon.devices.ipus[0]
    board.call(lambda: ipu.tiles.mark_bad_parity(7, 0x4C100))
    assert c("tdi-mem-read 7 0x4c100 8").split()[0] == "PARITY"
    assert c.signals(1) == [(44, 5)]
    assert c("reg EXC_CAUSE") == str(ExceptionCause.PARITY)
    assert c("reset") == "ok"
    assert c("tdi-mem-read 7 0x4c100 8") == "OK 0"
    assert c("reg RESET_COUNT") == "1" and c("reg EXC_STATUS") == "0"


def test_icu_by_ioctl(client: Callable[[int], Client]) -> None:
    c = attached(client, 3, 8)
    assert c(f"icu {op_word(Op.READ_HARDWARE_ID)} 0 0 0 0") == f"{0x0103} 0 0 0 0"
    board_type = c(f"icu {op_word(Op.READ_BOARD_TYPE)} 0 0 0 0").split()
    assert int(board_type[0]).to_bytes(4, "little") + int(board_type[1]).to_bytes(4, "little") == b"M2000\0\0\0"
    assert c(f"icu {op_word(Op.READ_CLOCK)} 0 0 0 0") == f"{op_word(Op.READ_CLOCK)} 1330 0 0 0"
    assert c(f"icu {op_word(0x7ff)} 0 0 0 0").split()[:2] == [str(ERROR_MARKER), "1"]
    assert c("icu-recv") == "none"
    assert c.signals(1, 100) == []  # WRITE_READ rings no doorbell
    assert c(f"icu-send {op_word(Op.READ_TEMPERATURE)} 0 0 0 0") == "ok"
    assert c.signals(1) == [(45, 8)]
    assert c("icu-recv") == f"{op_word(Op.READ_TEMPERATURE)} 45000 0 0 0"
    assert c(f"icu {op_word(Op.REBOOT, 8)} 0 0 0 0") == "0 0 0 0 0"
    assert c("reg RESET_COUNT") == "1"


@pytest.mark.parametrize("mapped", [False, True], ids=["pwrite-doorbell", "mapped-doorbell"])
def test_mailbox_rings_doorbell_and_poll(client: Callable[[int], Client], mapped: bool) -> None:
    c = attached(client, 0, 3)
    assert c("mbox-wait 50") == "timeout"
    assert c(f"mbox-post {op_word(Op.READ_BOOT_STATUS)} 0 0 0 0") == "ok"
    assert c(f"mbox-post {op_word(Op.READ_POWER)} 0 0 0 0") == "ok"
    assert c("mbox-ring mapped" if mapped else "mbox-ring") == "ok"
    assert c("mbox-wait 2000") == "ready"
    assert c.signals(1) == [(45, 3)]
    assert c("mbox-take") == f"{op_word(Op.READ_BOOT_STATUS)} 1 0 0 0"
    assert c("mbox-take") == f"{op_word(Op.READ_POWER)} 150000 0 0 0"
    assert c("mbox-take") == "none"


def test_gs1_sync_signals_its_side(client: Callable[[int], Client]) -> None:
    c = attached(client, 2, 4)
    assert c("set CMD_SYNC 4") == "ok"
    assert c.signals(1) == [(46, 4)]
    assert c("set CMD_SYNC 13") == "ok"
    assert c.signals(1) == [(47, 4)]
    assert c("reg SYNC_GS1_COUNT") == "2"
    assert c("set CMD_SYNC 9") == "ok" and int(c("reg SYNC_STATUS")) & 2


def test_gs2_completes_only_when_the_whole_board_has_arrived(client: Callable[[int], Client]) -> None:
    clients = [attached(client, i, 100 + i) for i in range(4)]
    for i, c in enumerate(clients[:3]):
        assert c(f"set CMD_SYNC {14 if i == 0 else 6}") == "ok"
        assert int(c("reg SYNC_STATUS")) & 1  # waiting
    assert all(c.signals(1, 150) == [] for c in clients[:3])
    assert clients[3]("set CMD_SYNC 6") == "ok"
    assert clients[0].signals(1) == [(49, 100)]  # master side
    assert [c.signals(1) for c in clients[1:]] == [[(48, 101)], [(48, 102)], [(48, 103)]]
    assert all(c("reg SYNC_GS2_COUNT") == "1" and int(c("reg SYNC_STATUS")) & 1 == 0 for c in clients)


def test_commands_stored_through_a_mapping_are_picked_up(client: Callable[[int], Client]) -> None:
    c = attached(client, 1, 6)
    assert c("store CMD_SYNC 12") == "ok"
    assert c.signals(1) == [(47, 6)]
    assert c("store CMD_RESET 1") == "ok"
    assert wait_for(lambda: c("reg RESET_COUNT") == "1", 2)
    assert c("reg CMD_RESET") == "0"
    assert c("store VENDOR_ID 0") == "ok"  # read-only: restored by the watcher
    assert wait_for(lambda: c("reg VENDOR_ID") == str(0x1D95), 2)


def test_interrupt_mask_register_through_pwrite(client: Callable[[int], Client], board: RunningDaemon) -> None:
    c = attached(client, 0, 1)
    assert c("set INT_MASK 4") == "ok"
    assert c("set CMD_SYNC 4") == "ok"
    assert c.signals(1, 150) == []
    assert c("reg INT_PENDING") == "4"
    assert c("set INT_MASK 0") == "ok"
    assert c.signals(1) == [(46, 1)]
    time.sleep(0)
