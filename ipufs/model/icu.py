# The ICU, the board's management microcontroller, and its mailbox.
#
# Messages are five u32 words; the first request word is the operation word
# `version << 28 | op << 16 | 0x20c`. Op numbers and the layouts of their
# answers follow aspen-sdk (aspen/sdk/src/icu of the research repository
# named in shared/reference/ipu-facts.md): ReadHardwareId 3 (pcb, bom in
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the client library imports this module and must not load numpy
    from ipufs.model.memory import BarMemory

MESSAGE = struct.Struct("<5I")
LOWER = 0x20C
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
    # ipufs's own:
    READ_TEMPERATURE = 96
    READ_POWER = 97
    READ_CLOCK = 98


class IcuError(enum.IntEnum):
    """Word 1 of an error answer (word 0 is ERROR_MARKER, word 2 the request's
    operation word)."""

    UNKNOWN_OP = 1
    BAD_FORMAT = 2  # the low 16 bits of the operation word are not 0x20c
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


@dataclass
class Board:
    """What the ICU knows of its board."""

    pcb: int
    bom: int
    board_type: str
    firmware: tuple[int, int, int]
    bootloader: tuple[int, int, int]
    temperature_mc: int
    power_mw: int
    clock_mhz: int


@dataclass
class Icu:
    board: Board
    mailbox: BarMemory
    on_reboot: Callable[[], None]
    boot_status: int = 1  # reset cause: 1 = power-on
    image: int = 0
    upgrade: bytearray | None = None
    upgrade_length: int = 0
    upgrade_target: str = "firmware"
    upgrades: list[tuple[str, bytes]] = field(default_factory=list)
    #: The fault API: while True the ICU takes requests and answers none
    #: (a host waiting for an answer times out).
    unresponsive: bool = False
    #: Told of every request and its answer (the driver's trace); no I/O here.
    observer: Callable[[tuple[int, ...], tuple[int, ...] | None], None] | None = None

    # --- the rings -------------------------------------------------------------
    def format(self) -> None:
        """Write the mailbox header: layout, empty rings."""
        m = self.mailbox
        for name, value in ((Header.MAGIC, MAGIC), (Header.LAYOUT_VERSION, LAYOUT_VERSION),
                            (Header.SLOT_SIZE, SLOT_SIZE), (Header.REQUEST_SLOTS, SLOTS),
                            (Header.REQUEST_OFFSET, REQUEST_RING), (Header.RESPONSE_SLOTS, SLOTS),
                            (Header.RESPONSE_OFFSET, RESPONSE_RING)):
            m.words[name // 4] = value
        for name in (Header.REQUEST_HEAD, Header.REQUEST_TAIL, Header.RESPONSE_HEAD,
                     Header.RESPONSE_TAIL, Header.DOORBELL, Header.STATUS, Header.DROPPED):
            m.words[name // 4] = 0

    def _get(self, field_: Header) -> int:
        return int(self.mailbox.words[field_ // 4])

    def _set(self, field_: Header, value: int) -> None:
        if self._get(field_) != value & 0xFFFFFFFF:
            self.mailbox.write(field_, struct.pack("<I", value & 0xFFFFFFFF))

    @property
    def responses_waiting(self) -> int:
        return (self._get(Header.RESPONSE_HEAD) - self._get(Header.RESPONSE_TAIL)) & 0xFFFFFFFF

    def serve_ring(self) -> int:
        """Serve every request the host has put in the request ring; returns
        how many responses were queued."""
        self._set(Header.DOORBELL, 0)
        head, tail = self._get(Header.REQUEST_HEAD), self._get(Header.REQUEST_TAIL)
        pending = (head - tail) & 0xFFFFFFFF
        if pending > SLOTS:  # the host broke the ring: skip to its head
            tail, pending = (head - SLOTS) & 0xFFFFFFFF, SLOTS
        queued = 0
        for i in range(pending):
            slot = REQUEST_RING + ((tail + i) % SLOTS) * SLOT_SIZE
            request = MESSAGE.unpack(self.mailbox.read(slot, MESSAGE.size))
            response = self.handle(request)
            if response is not None:
                queued += self.queue_response(response)
        self._set(Header.REQUEST_TAIL, head)
        return queued

    def submit(self, request: tuple[int, ...]) -> int:
        """A request given by ioctl: served now, its answer queued."""
        response = self.handle(request)
        return 0 if response is None else self.queue_response(response)

    def queue_response(self, response: tuple[int, ...]) -> int:
        head = self._get(Header.RESPONSE_HEAD)
        if self.responses_waiting >= SLOTS:
            self._set(Header.DROPPED, self._get(Header.DROPPED) + 1)
            self._set(Header.STATUS, self._get(Header.STATUS) | STATUS_OVERFLOW)
            return 0
        self.mailbox.write(RESPONSE_RING + (head % SLOTS) * SLOT_SIZE, MESSAGE.pack(*response))
        self._set(Header.RESPONSE_HEAD, head + 1)
        self._set(Header.STATUS, self._get(Header.STATUS) | STATUS_RESPONSES)
        return 1

    def pop_response(self) -> tuple[int, ...] | None:
        """Take the next response (the MAILBOX_READ_ONLY ioctl)."""
        if not self.responses_waiting:
            return None
        tail = self._get(Header.RESPONSE_TAIL)
        data = self.mailbox.read(RESPONSE_RING + (tail % SLOTS) * SLOT_SIZE, MESSAGE.size)
        self._set(Header.RESPONSE_TAIL, tail + 1)
        self.refresh_status()
        return MESSAGE.unpack(data)

    def refresh_status(self) -> None:
        status = self._get(Header.STATUS) & ~STATUS_RESPONSES
        self._set(Header.STATUS, status | (STATUS_RESPONSES if self.responses_waiting else 0))

    # --- commands ------------------------------------------------------------
    def handle(self, request: tuple[int, ...]) -> tuple[int, ...] | None:
        """The answer to one request (None: the command has none, or the
        ICU is unresponsive)."""
        answer = None if self.unresponsive else self._answer(request)
        if self.observer is not None:
            self.observer(request, answer)
        return answer

    def _answer(self, request: tuple[int, ...]) -> tuple[int, ...] | None:
        word = request[0]
        if word & 0xFFFF != LOWER:
            return self._error(IcuError.BAD_FORMAT, word)
        op = (word >> 16) & 0xFFF
        args = request[1:]
        b = self.board
        if op == Op.READ_HARDWARE_ID:
            return (b.pcb & 0xFF | (b.bom & 0xFF) << 8, 0, 0, 0, 0)
        if op == Op.READ_FIRMWARE_VERSION:
            major, minor, revision = b.firmware
            return (word, major | minor << 16, revision, self.image | self.image << 8, 0)
        if op == Op.READ_IMAGE_VERSION:
            if args[0] not in (0, 1, 2):
                return self._error(IcuError.BAD_ARGUMENT, word)
            major, minor, revision = b.bootloader if args[0] == 2 else b.firmware
            return (word, major | minor << 16, revision, 0, 0)
        if op == Op.READ_BOARD_TYPE:
            return MESSAGE.unpack(b.board_type.encode()[:19].ljust(20, b"\0"))
        if op == Op.READ_BOOT_STATUS:
            return (word, self.boot_status, self.image, 0, 0)
        if op == Op.CLEAR_STATUS:
            self.boot_status = 0
            return (word, 0, 0, 0, 0)
        if op == Op.REBOOT:
            if args[0] not in (0, 1):
                return self._error(IcuError.BAD_ARGUMENT, word)
            self.image = args[0]
            self.boot_status = 2  # reset cause: software reboot
            self.on_reboot()
            return None
        if op in (Op.START_FIRMWARE_UPGRADE, Op.START_BOOTLOADER_UPGRADE):
            if not 0 < args[0] <= 1 << 20:
                return (word, 1, 0, 0, 0)
            self.upgrade = bytearray()
            self.upgrade_length = args[0]
            self.upgrade_target = "bootloader" if op == Op.START_BOOTLOADER_UPGRADE else "firmware"
            return (word, 0, 0, 0, 0)
        if op == Op.WRITE_UPGRADE_CHUNK:
            if self.upgrade is None:
                return self._error(IcuError.BAD_STATE, word)
            take = min(16, self.upgrade_length - len(self.upgrade))
            self.upgrade += struct.pack("<4I", *args)[:take]
            return (word, 0, 0, 0, 0)
        if op == Op.COMPLETE_UPGRADE:
            if self.upgrade is None:
                return self._error(IcuError.BAD_STATE, word)
            ok = len(self.upgrade) == self.upgrade_length
            if ok:
                self.upgrades.append((self.upgrade_target, bytes(self.upgrade)))
            self.upgrade = None
            return (word, 0 if ok else 1, 0, 0, 0)
        if op == Op.READ_TEMPERATURE:
            return (word, b.temperature_mc, 0, 0, 0)
        if op == Op.READ_POWER:
            return (word, b.power_mw, 0, 0, 0)
        if op == Op.READ_CLOCK:
            return (word, b.clock_mhz, 0, 0, 0)
        return self._error(IcuError.UNKNOWN_OP, word)

    @staticmethod
    def _error(code: IcuError, word: int) -> tuple[int, ...]:
        return (ERROR_MARKER, int(code), word, 0, 0)
