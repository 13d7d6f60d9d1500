# The ICU's wire format: what host software and the emulated ICU share.
#
# Messages are five u32 words; the first request word is the operation word
# `version << 28 | op << 16 | 0x20c` (or 0x20e, the low half of the ICU
# reset request a runtime that drives a C600 sends: osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs, 0x4078020e, op 120, whose answer's word 0
# carries the request's upper 16 bits). Op numbers and the layouts of their
# answers follow aspen-sdk (aspen/sdk/src/icu of the public research
# repository github.com/Saghetti0/graphcore-ipu-research): ReadHardwareId 3 (pcb, bom in
# word 0), ReadFirmwareVersion 4, ReadBoardType 5 (a NUL-terminated
# string), ReadImageVersion 13, Reboot 16 (no answer), ReadBootStatus 17,
# ClearStatus 20, the upgrade commands 40..43. Telemetry ops and the error
# answer are ipufs's own (docs/icu.md).
#
# The mailbox node holds two rings of 32-byte slots, a request ring the host
# fills and a response ring the ICU fills; a response raises the ICU
# doorbell interrupt. Layout: docs/icu.md.
from __future__ import annotations

import enum
import struct
MESSAGE = struct.Struct("<5I")
LOWER = 0x20C
#: the low 16 bits an operation word may carry (0x20e: the C600's ICU reset)
LOWERS = frozenset({LOWER, 0x20E})
SLOT_SIZE = 32
SLOTS = 64
MAGIC = 0x30554349  # "ICU0"
LAYOUT_VERSION = 1
REQUEST_RING = 0x1000
RESPONSE_RING = 0x2000
ERROR_MARKER = 0xFFFFFFFF


class Op(enum.IntEnum):
    READ_HARDWARE_ID = 3
    READ_FIRMWARE_VERSION = 4
    READ_BOARD_TYPE = 5
    READ_IMAGE_VERSION = 13
    REBOOT = 16
    READ_BOOT_STATUS = 17
    CLEAR_STATUS = 20
    START_FIRMWARE_UPGRADE = 40
    WRITE_UPGRADE_CHUNK = 41
    COMPLETE_UPGRADE = 42
    START_BOOTLOADER_UPGRADE = 43
    RESET = 120  # the C600 runtime's bring-up request 0x4078020e
    # ipufs's own:
    READ_TEMPERATURE = 96
    READ_POWER = 97
    READ_CLOCK = 98


class IcuError(enum.IntEnum):
    """Word 1 of an error answer (word 0 is ERROR_MARKER, word 2 the request's
    operation word)."""

    UNKNOWN_OP = 1
    BAD_FORMAT = 2  # the low 16 bits of the operation word are neither 0x20c nor 0x20e
    BAD_ARGUMENT = 3
    BAD_STATE = 4  # an upgrade chunk without a started upgrade


class Header(enum.IntEnum):
    """u32 fields at the start of the mailbox node (byte offsets)."""

    MAGIC = 0x00
    LAYOUT_VERSION = 0x04
    SLOT_SIZE = 0x08
    REQUEST_SLOTS = 0x0C
    REQUEST_OFFSET = 0x10
    RESPONSE_SLOTS = 0x14
    RESPONSE_OFFSET = 0x18
    REQUEST_HEAD = 0x40  # host: requests written so far
    REQUEST_TAIL = 0x44  # ICU: requests consumed so far
    RESPONSE_HEAD = 0x48  # ICU: responses written so far
    RESPONSE_TAIL = 0x4C  # host: responses consumed so far
    DOORBELL = 0x50  # host writes 1: the ICU serves the request ring
    STATUS = 0x54  # bit 0 responses waiting, bit 1 overflowed
    DROPPED = 0x58  # responses lost to a full response ring


STATUS_RESPONSES = 1 << 0
STATUS_OVERFLOW = 1 << 1


def op_word(op: int, version: int = 0) -> int:
    return (version & 0xF) << 28 | (op & 0xFFF) << 16 | LOWER


def op_of(word: int) -> int:
    """The operation number of an operation word."""
    return (word >> 16) & 0xFFF


def op_name(word: int) -> str | int:
    """The name of an operation word's operation, or its number when it is
    not one the ICU knows (for traces)."""
    op = op_of(word)
    return Op(op).name if op in Op._value2member_map_ else op

