# The ICU, the board's management microcontroller, and its mailbox: the
# emulated microcontroller behind the wire format of ipufs/abi/icu.py. The
# mailbox node holds two rings of 32-byte slots, a request ring the host
# fills and a response ring the ICU fills; a response raises the ICU
# doorbell interrupt. Layout: docs/icu.md.
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ipufs.abi.icu import (
    ERROR_MARKER, LAYOUT_VERSION, LOWERS, MAGIC, MESSAGE, REQUEST_RING, RESPONSE_RING, SLOT_SIZE, SLOTS,
    STATUS_OVERFLOW, STATUS_RESPONSES, Header, IcuError, Op, op_of,
)
from ipufs.model.memory import BarMemory

#: An answer of the ICU, five words (None: the operation answers nothing).
Answer = tuple[int, ...] | None
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

    def update(self, *, temperature_mc: int | None = None, power_mw: int | None = None,
               clock_mhz: int | None = None) -> None:
        """New telemetry (None: unchanged); a value that does not fit a u32
        register is refused (ValueError) and nothing changes."""
        given = {"temperature_mc": temperature_mc, "power_mw": power_mw, "clock_mhz": clock_mhz}
        for name, value in given.items():
            if value is not None and not 0 <= value <= 0xFFFFFFFF:
                raise ValueError(f"{name} {value} does not fit a u32 register")
        for name, value in given.items():
            if value is not None:
                setattr(self, name, value)


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
    #: The response ring's change sequence (a seqlock, and a claim): odd
    #: while someone changes the ring (RESPONSE_HEAD, RESPONSE_TAIL, STATUS,
    #: its slots) or copies bytes over the header, even otherwise. Each
    #: single change is one aligned word store. Native code on other
    #: threads (the fast path, without the daemon's lock) reads the count
    #: inside it, and pops a response only after claiming it (even to odd,
    #: atomically); the model's changes claim it too: ``claim`` and
    #: ``release`` (the fast path gives atomic ones; without it nothing
    #: else changes the ring, and the sequence is simply bumped).
    sequence: NDArray[np.uint32] = field(default_factory=lambda: np.zeros(1, dtype=np.uint32))
    claim: Callable[[], None] | None = None
    release: Callable[[], None] | None = None
    _claims: int = 0  # nested changes (a pop refreshes the status) claim once

    # --- the rings -------------------------------------------------------------
    def _begin(self) -> None:
        if not self._claims:
            if self.claim is None:
                self._bump()
            else:
                self.claim()
        self._claims += 1

    def _end(self) -> None:
        self._claims -= 1
        if not self._claims:
            if self.release is None:
                self._bump()
            else:
                self.release()

    def _bump(self) -> None:
        """The sequence one further: one aligned word store."""
        self.sequence[0] = (int(self.sequence[0]) + 1) & 0xFFFFFFFF

    def format(self) -> None:
        """Write the mailbox header: layout, empty rings."""
        self._begin()
        try:
            self._write_header()
        finally:
            self._end()

    def clear(self) -> None:
        """A zeroed mailbox with a fresh header (a reset)."""
        self._begin()
        try:
            self.mailbox.clear()
            self._write_header()
        finally:
            self._end()

    def host_write(self, offset: int, data: bytes | memoryview) -> int:
        """Store bytes the host wrote (pwrite on the mailbox node): a byte
        copy, inside the change sequence."""
        self._begin()
        try:
            return self.mailbox.write(offset, data)
        finally:
            self._end()

    def _write_header(self) -> None:
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
            self.mailbox.store_word(field_ // 4, value & 0xFFFFFFFF)

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
        self._begin()
        try:
            head = self._get(Header.RESPONSE_HEAD)
            if self.responses_waiting >= SLOTS:
                self._set(Header.DROPPED, self._get(Header.DROPPED) + 1)
                self._set(Header.STATUS, self._get(Header.STATUS) | STATUS_OVERFLOW)
                return 0
            self.mailbox.write(RESPONSE_RING + (head % SLOTS) * SLOT_SIZE, MESSAGE.pack(*response))
            self._set(Header.RESPONSE_HEAD, head + 1)
            self._set(Header.STATUS, self._get(Header.STATUS) | STATUS_RESPONSES)
            return 1
        finally:
            self._end()

    def pop_response(self) -> tuple[int, ...] | None:
        """Take the next response (the MAILBOX_READ_ONLY ioctl; the native
        fast path does the same, native/src/fastpath.c)."""
        self._begin()
        try:
            if not self.responses_waiting:
                return None
            tail = self._get(Header.RESPONSE_TAIL)
            data = self.mailbox.read(RESPONSE_RING + (tail % SLOTS) * SLOT_SIZE, MESSAGE.size)
            self._set(Header.RESPONSE_TAIL, tail + 1)
            self.refresh_status()
            return MESSAGE.unpack(data)
        finally:
            self._end()

    def refresh_status(self) -> None:
        self._begin()
        try:
            status = self._get(Header.STATUS) & ~STATUS_RESPONSES
            self._set(Header.STATUS, status | (STATUS_RESPONSES if self.responses_waiting else 0))
        finally:
            self._end()

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
        if word & 0xFFFF not in LOWERS:
            return self._error(IcuError.BAD_FORMAT, word)
        try:
            handler = _HANDLERS[Op(op_of(word))]
        except ValueError:
            return self._error(IcuError.UNKNOWN_OP, word)
        return handler(self, word, request[1:])

    # One method per operation, each given the operation word and the four
    # argument words; _HANDLERS below maps every Op to one of them.
    def _hardware_id(self, word: int, args: tuple[int, ...]) -> Answer:
        b = self.board
        return (b.pcb & 0xFF | (b.bom & 0xFF) << 8, 0, 0, 0, 0)

    def _firmware_version(self, word: int, args: tuple[int, ...]) -> Answer:
        major, minor, revision = self.board.firmware
        return (word, major | minor << 16, revision, self.image | self.image << 8, 0)

    def _image_version(self, word: int, args: tuple[int, ...]) -> Answer:
        if args[0] not in (0, 1, 2):
            return self._error(IcuError.BAD_ARGUMENT, word)
        major, minor, revision = self.board.bootloader if args[0] == 2 else self.board.firmware
        return (word, major | minor << 16, revision, 0, 0)

    def _board_type(self, word: int, args: tuple[int, ...]) -> Answer:
        return MESSAGE.unpack(self.board.board_type.encode()[:19].ljust(20, b"\0"))

    def _boot_status(self, word: int, args: tuple[int, ...]) -> Answer:
        return (word, self.boot_status, self.image, 0, 0)

    def _clear_status(self, word: int, args: tuple[int, ...]) -> Answer:
        self.boot_status = 0
        return (word, 0, 0, 0, 0)

    def _reboot(self, word: int, args: tuple[int, ...]) -> Answer:
        if args[0] not in (0, 1):
            return self._error(IcuError.BAD_ARGUMENT, word)
        self.image = args[0]
        self.boot_status = 2  # reset cause: software reboot
        self.on_reboot()
        return None

    def _start_upgrade(self, word: int, args: tuple[int, ...]) -> Answer:
        if not 0 < args[0] <= 1 << 20:
            return (word, 1, 0, 0, 0)
        self.upgrade = bytearray()
        self.upgrade_length = args[0]
        self.upgrade_target = "bootloader" if op_of(word) == Op.START_BOOTLOADER_UPGRADE else "firmware"
        return (word, 0, 0, 0, 0)

    def _upgrade_chunk(self, word: int, args: tuple[int, ...]) -> Answer:
        if self.upgrade is None:
            return self._error(IcuError.BAD_STATE, word)
        take = min(16, self.upgrade_length - len(self.upgrade))
        self.upgrade += struct.pack("<4I", *args)[:take]
        return (word, 0, 0, 0, 0)

    def _complete_upgrade(self, word: int, args: tuple[int, ...]) -> Answer:
        if self.upgrade is None:
            return self._error(IcuError.BAD_STATE, word)
        ok = len(self.upgrade) == self.upgrade_length
        if ok:
            self.upgrades.append((self.upgrade_target, bytes(self.upgrade)))
        self.upgrade = None
        return (word, 0 if ok else 1, 0, 0, 0)

    def _reset(self, word: int, args: tuple[int, ...]) -> Answer:
        """The ICU resets itself: an upgrade in progress is dropped (the
        rings, the boot status and the board stay); the answer echoes the
        request's word, as the C600 runtime checks."""
        self.upgrade = None
        return (word, 0, 0, 0, 0)

    def _temperature(self, word: int, args: tuple[int, ...]) -> Answer:
        return (word, self.board.temperature_mc, 0, 0, 0)

    def _power(self, word: int, args: tuple[int, ...]) -> Answer:
        return (word, self.board.power_mw, 0, 0, 0)

    def _clock(self, word: int, args: tuple[int, ...]) -> Answer:
        return (word, self.board.clock_mhz, 0, 0, 0)

    @staticmethod
    def _error(code: IcuError, word: int) -> tuple[int, ...]:
        return (ERROR_MARKER, int(code), word, 0, 0)


#: Every operation of abi/icu.py's Op and the method that answers it;
#: checked at import, so a new Op without a handler cannot go unnoticed.
_HANDLERS: dict[Op, Callable[[Icu, int, tuple[int, ...]], Answer]] = {
    Op.READ_HARDWARE_ID: Icu._hardware_id,
    Op.READ_FIRMWARE_VERSION: Icu._firmware_version,
    Op.READ_BOARD_TYPE: Icu._board_type,
    Op.READ_IMAGE_VERSION: Icu._image_version,
    Op.REBOOT: Icu._reboot,
    Op.READ_BOOT_STATUS: Icu._boot_status,
    Op.CLEAR_STATUS: Icu._clear_status,
    Op.START_FIRMWARE_UPGRADE: Icu._start_upgrade,
    Op.WRITE_UPGRADE_CHUNK: Icu._upgrade_chunk,
    Op.COMPLETE_UPGRADE: Icu._complete_upgrade,
    Op.START_BOOTLOADER_UPGRADE: Icu._start_upgrade,
    Op.RESET: Icu._reset,
    Op.READ_TEMPERATURE: Icu._temperature,
    Op.READ_POWER: Icu._power,
    Op.READ_CLOCK: Icu._clock,
}
if set(_HANDLERS) != set(Op):  # fail at import, never silently
    raise ImportError(f"ICU operations without a handler: {sorted(set(Op) - set(_HANDLERS))}")
