# The ICU, the board's management microcontroller, and its mailbox: the
# emulated microcontroller behind the wire format of ipufs/abi/icu.py. The
# mailbox node holds two rings of 32-byte slots, a request ring the host
# fills and a response ring the ICU fills; a response raises the ICU
# doorbell interrupt. Layout: docs/icu.md.
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from ipufs.abi.icu import (
    ERROR_MARKER, LAYOUT_VERSION, LOWER, MAGIC, MESSAGE, REQUEST_RING, RESPONSE_RING, SLOT_SIZE, SLOTS,
    STATUS_OVERFLOW, STATUS_RESPONSES, Header, IcuError, Op, op_of, op_word,
)
from ipufs.model.memory import BarMemory

#: Told of each ICU request and its answer (None: none was given).
IcuObserver = Callable[[tuple[int, ...], tuple[int, ...] | None], None]


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
    observer: IcuObserver | None = None

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
        op = op_of(word)
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
