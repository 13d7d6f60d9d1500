# The ICU's command table and mailbox rings, and sync groups, on the model.
from __future__ import annotations

import struct

import pytest

from ipufs.abi.icu import (
    ERROR_MARKER, MESSAGE, REQUEST_RING, RESPONSE_RING, SLOT_SIZE, SLOTS, Header, IcuError, Op, op_word,
)
from ipufs.abi.interrupts import Interrupt
from ipufs.model.icu import Board, Icu
from ipufs.model.memory import BarMemory
from ipufs.model.sync import SyncGroup, SyncRefused, Zone, interrupt_for


def icu() -> tuple[Icu, list[str]]:
    reboots: list[str] = []
    board = Board(pcb=3, bom=1, board_type="C600", firmware=(2, 5, 9), bootloader=(1, 0, 4),
                  temperature_mc=45_000, power_mw=185_000, clock_mhz=1500)
    i = Icu(board, BarMemory(bytearray(64 * 1024)), on_reboot=lambda: reboots.append("reboot"))
    i.format()
    return i, reboots


COMMANDS = [
    ((op_word(Op.READ_HARDWARE_ID), 0, 0, 0, 0), (0x0103, 0, 0, 0, 0)),
    ((op_word(Op.READ_FIRMWARE_VERSION), 0, 0, 0, 0), (op_word(4), 2 | 5 << 16, 9, 0, 0)),
    ((op_word(Op.READ_IMAGE_VERSION), 2, 0, 0, 0), (op_word(13), 1 | 0 << 16, 4, 0, 0)),
    ((op_word(Op.READ_IMAGE_VERSION), 7, 0, 0, 0), (ERROR_MARKER, IcuError.BAD_ARGUMENT, op_word(13), 0, 0)),
    ((op_word(Op.READ_BOARD_TYPE), 0, 0, 0, 0), MESSAGE.unpack(b"C600".ljust(20, b"\0"))),
    ((op_word(Op.READ_BOOT_STATUS), 0, 0, 0, 0), (op_word(17), 1, 0, 0, 0)),
    ((op_word(Op.READ_TEMPERATURE), 0, 0, 0, 0), (op_word(96), 45_000, 0, 0, 0)),
    ((op_word(Op.READ_POWER), 0, 0, 0, 0), (op_word(97), 185_000, 0, 0, 0)),
    ((op_word(Op.READ_CLOCK), 0, 0, 0, 0), (op_word(98), 1500, 0, 0, 0)),
    ((op_word(0x123), 0, 0, 0, 0), (ERROR_MARKER, IcuError.UNKNOWN_OP, op_word(0x123), 0, 0)),
    ((0x00030000, 0, 0, 0, 0), (ERROR_MARKER, IcuError.BAD_FORMAT, 0x00030000, 0, 0)),
    ((op_word(Op.WRITE_UPGRADE_CHUNK), 1, 2, 3, 4), (ERROR_MARKER, IcuError.BAD_STATE, op_word(41), 0, 0)),
    # the C600 runtime's ICU reset (osmarks/ipu-stack): low half 0x20e, the answer echoes the word
    ((0x4078020E, 0, 0, 0, 0), (0x4078020E, 0, 0, 0, 0)),
    ((0x0003020A, 0, 0, 0, 0), (ERROR_MARKER, IcuError.BAD_FORMAT, 0x0003020A, 0, 0)),
]


@pytest.mark.parametrize("request_,response", COMMANDS, ids=[f"op{(r[0] >> 16) & 0xfff}" for r, _ in COMMANDS])
def test_command_table(request_: tuple[int, ...], response: tuple[int, ...]) -> None:
    assert icu()[0].handle(request_) == response


def test_the_version_nibble_is_accepted() -> None:
    assert icu()[0].handle((op_word(Op.READ_CLOCK, version=3), 0, 0, 0, 0))[1] == 1500


def test_reboot_has_no_answer_and_resets() -> None:
    i, reboots = icu()
    assert i.handle((op_word(Op.REBOOT, version=8), 1, 0, 0, 0)) is None
    assert reboots == ["reboot"]
    assert i.handle((op_word(Op.READ_BOOT_STATUS), 0, 0, 0, 0)) == (op_word(17), 2, 1, 0, 0)
    assert i.handle((op_word(Op.CLEAR_STATUS), 0, 0, 0, 0)) == (op_word(20), 0, 0, 0, 0)
    assert i.handle((op_word(Op.READ_BOOT_STATUS), 0, 0, 0, 0))[1] == 0


def test_an_icu_reset_drops_an_upgrade_in_progress() -> None:
    unit, _ = icu()
    unit.handle((op_word(Op.START_FIRMWARE_UPGRADE), 16, 0, 0, 0))
    assert unit.handle((0x4078020E, 0, 0, 0, 0)) == (0x4078020E, 0, 0, 0, 0)
    assert unit.upgrade is None and unit.boot_status == 1


def test_firmware_upgrade_collects_the_image() -> None:
    i, _ = icu()
    image = bytes(range(40))
    assert i.handle((op_word(Op.START_FIRMWARE_UPGRADE), len(image), 0, 0, 0))[1] == 0
    for k in range(0, len(image), 16):
        chunk = image[k : k + 16].ljust(16, b"\0")
        assert i.handle((op_word(Op.WRITE_UPGRADE_CHUNK), *struct.unpack("<4I", chunk)))[1] == 0
    assert i.handle((op_word(Op.COMPLETE_UPGRADE), 0, 0, 0, 0))[1] == 0
    assert i.upgrades == [("firmware", image)]


def put_request(i: Icu, message: tuple[int, ...]) -> None:
    head = int(i.mailbox.words[Header.REQUEST_HEAD // 4])
    i.mailbox.write(REQUEST_RING + (head % SLOTS) * SLOT_SIZE, MESSAGE.pack(*message))
    i.mailbox.write(Header.REQUEST_HEAD, struct.pack("<I", head + 1))


def test_rings_carry_requests_and_responses() -> None:
    i, _ = icu()
    assert i.mailbox.read(0, 4) == b"ICU0"
    put_request(i, (op_word(Op.READ_CLOCK), 0, 0, 0, 0))
    put_request(i, (op_word(Op.READ_POWER), 0, 0, 0, 0))
    i.mailbox.write(Header.DOORBELL, struct.pack("<I", 1))
    assert i.serve_ring() == 2
    assert int(i.mailbox.words[Header.DOORBELL // 4]) == 0
    assert int(i.mailbox.words[Header.REQUEST_TAIL // 4]) == 2
    assert i.responses_waiting == 2 and int(i.mailbox.words[Header.STATUS // 4]) & 1
    assert MESSAGE.unpack(i.mailbox.read(RESPONSE_RING, 20))[1] == 1500
    assert i.pop_response() == (op_word(98), 1500, 0, 0, 0)
    assert i.pop_response() == (op_word(97), 185_000, 0, 0, 0)
    assert i.pop_response() is None and int(i.mailbox.words[Header.STATUS // 4]) & 1 == 0


def test_a_full_response_ring_counts_what_it_drops() -> None:
    i, _ = icu()
    for _ in range(SLOTS + 3):
        i.submit((op_word(Op.READ_CLOCK), 0, 0, 0, 0))
    assert i.responses_waiting == SLOTS
    assert int(i.mailbox.words[Header.DROPPED // 4]) == 3


def test_gs1_completes_at_once_on_its_side() -> None:
    done: list[tuple[int, int]] = []
    group = SyncGroup((0, 1), lambda m, z: done.append((m, z)))
    assert group.arrive(1, Zone.GS1) is False
    assert group.arrive(0, Zone.GS1_MSR) is False
    assert done == [(1, 4), (0, 12)]
    assert interrupt_for(Zone.GS1) is Interrupt.GS1_E0 and interrupt_for(Zone.GS1H_MSR) is Interrupt.GS1_E1


def test_gs2_waits_for_every_member_of_the_group() -> None:
    done: list[tuple[int, int]] = []
    group = SyncGroup((4, 5, 6, 7), lambda m, z: done.append((m, z)))
    assert group.arrive(4, Zone.GS2_MSR) and group.arrive(6, Zone.GS2) and group.arrive(5, Zone.GS2)
    assert done == [] and group.is_waiting(4)
    with pytest.raises(SyncRefused):
        group.arrive(4, Zone.GS2)  # still waiting
    assert group.arrive(7, Zone.GS2) is False
    assert done == [(4, 14), (5, 6), (6, 6), (7, 6)]
    assert [interrupt_for(z) for _, z in done] == [Interrupt.GS2_E1] + [Interrupt.GS2_E0] * 3


def test_gs2_and_gs2h_are_separate_barriers_and_reset_withdraws() -> None:
    done: list[tuple[int, int]] = []
    group = SyncGroup((0, 1), lambda m, z: done.append((m, z)))
    assert group.arrive(0, Zone.GS2H)
    assert group.arrive(1, Zone.GS2)
    group.withdraw(0)
    assert group.arrive(0, Zone.GS2) is False
    assert done == [(0, 6), (1, 6)]


@pytest.mark.parametrize("zone", [0, 1, 2, 3, 8, 11, 16, 255])
def test_only_external_zones_can_be_requested(zone: int) -> None:
    with pytest.raises(SyncRefused):
        SyncGroup((0,), lambda m, z: None).arrive(0, zone)
