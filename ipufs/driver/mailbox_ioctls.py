# The ICU mailbox's ioctls (MAILBOX_READ_ONLY, MAILBOX_WRITE_ONLY,
# MAILBOX_WRITE_READ, MAILBOX_GET_OFFSETS; docs/abi.md): requests to the
# board's ICU and its answers, by ioctl rather than through the rings of
# the mailbox node. They serve any process that has a node of the IPU
# open, as board management tools do not attach: reading the ring, and
# requests that only read the board, on any open (gc-info's queries);
# requests that change the board as the IPU's other changes
# (driver.check_change). Each is a handler of the
# driver's ioctl table (driver.IOCTL_ROLES) over what it reads of the
# driver: the devices and the argument reader.
from __future__ import annotations

import errno
import struct
from typing import Protocol

from ipufs.abi import icu
from ipufs.abi.icu import MESSAGE as icu_message
from ipufs.abi.icu import Op, op_of
from ipufs.abi.ioctls import MESSAGE_POINTERS
from ipufs.driver.arguments import U64, Arg, Arguments, Command
from ipufs.driver.devices import DeviceSet
from ipufs.fuse.errors import FUSEError


#: The ICU operations that only read the board. A request of any other
#: (REBOOT, CLEAR_STATUS, the upgrades, and ops the ICU does not know)
#: changes it: it needs a file opened for writing, and while another
#: process is attached it is refused to those that may not change the IPU.
QUERIES = frozenset({Op.READ_HARDWARE_ID, Op.READ_FIRMWARE_VERSION, Op.READ_BOARD_TYPE, Op.READ_IMAGE_VERSION,
                     Op.READ_BOOT_STATUS, Op.READ_TEMPERATURE, Op.READ_POWER, Op.READ_CLOCK})


class MailboxDriver(Protocol):
    """What the mailbox's handlers use of the driver."""

    @property
    def devices(self) -> DeviceSet: ...

    @property
    def arguments(self) -> Arguments: ...

    def check_change(self, ipu: int, fh: int, what: str) -> None: ...


def _request(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
             command: Command, at: int | None = None) -> tuple[int, ...]:
    """The request an ioctl carries (or that lies at ``at`` in the caller's
    memory), once the file may send it: a query on any open, any other
    request on one that may change the IPU."""
    if at is None:
        request = icu_message.unpack_from(driver.arguments.take(tgid, arg, data, command, icu_message.size))
    else:
        request = icu_message.unpack(driver.arguments.peek(tgid, at, icu_message.size))
    if op_of(request[0]) not in QUERIES:
        driver.check_change(ipu, fh, "send ICU requests that change the board")
    return request


def read(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
         command: Command) -> tuple[int, bytes]:
    """MAILBOX_READ_ONLY: the next response (EAGAIN: none), or with a u64
    how many wait."""
    unit = driver.devices.ipus[ipu].icu
    arguments = driver.arguments
    if command.size == U64:
        return 0, arguments.give(tgid, arg, unit.responses_waiting.to_bytes(U64, "little"), command)
    if not unit.responses_waiting:
        raise FUSEError(errno.EAGAIN, "no ICU response is waiting")
    if not command.carried_out:
        arguments.poke(tgid, arg, bytes(icu_message.size))  # never lose a response to a bad pointer
    response = unit.pop_response()
    assert response is not None
    return 0, arguments.give(tgid, arg, icu_message.pack(*response), command)


def write(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
          command: Command) -> tuple[int, bytes]:
    """MAILBOX_WRITE_ONLY: submit a request; its answer is queued."""
    driver.devices.ipus[ipu].icu_submit(_request(driver, ipu, fh, tgid, arg, data, command))
    return 0, b""


def write_read(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
               command: Command) -> tuple[int, bytes]:
    """MAILBOX_WRITE_READ: a request and its answer, in the argument; with
    8 bytes (the real driver's form) the argument points at a pointer to
    the request and one to where the answer goes, both read and written
    in the caller's memory."""
    model = driver.devices.ipus[ipu]
    sent = received = None
    if command.size == U64:
        sent, received = MESSAGE_POINTERS.unpack(driver.arguments.peek(tgid, arg, MESSAGE_POINTERS.size))
    request = _request(driver, ipu, fh, tgid, arg, data, command, sent)
    if model.icu.unresponsive:
        raise FUSEError(errno.ETIMEDOUT, "the ICU does not answer")
    answer = icu_message.pack(*(model.icu.handle(request) or (0, 0, 0, 0, 0)))
    if received is not None:
        driver.arguments.poke(tgid, received, answer)
        return 0, b""
    # With _IOW (how aspen-sdk calls it) the answer still comes back in
    # the caller's buffer, as the real driver writes it there.
    return 0, driver.arguments.give(tgid, arg, answer, command)


def offsets(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
            command: Command) -> tuple[int, bytes]:
    """MAILBOX_GET_OFFSETS: where the rings are in the mailbox node."""
    if command.size < 16:
        answer = struct.pack("<II", icu.REQUEST_RING, icu.RESPONSE_RING)
    else:
        answer = struct.pack("<IIII", icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING, icu.SLOTS)
    return 0, driver.arguments.give(tgid, arg, answer, command)
