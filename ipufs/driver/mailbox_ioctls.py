# The ICU mailbox's ioctls (MAILBOX_READ_ONLY, MAILBOX_WRITE_ONLY,
# MAILBOX_WRITE_READ, MAILBOX_GET_OFFSETS; docs/abi.md): requests to the
# board's ICU and its answers, by ioctl rather than through the rings of
# the mailbox node. They serve any process that has a node of the IPU
# open, as board management tools do not attach. Each is a handler of the
# driver's ioctl table (driver.IOCTL_ROLES) over what it reads of the
# driver: the devices and the argument reader.
from __future__ import annotations

import errno
import struct
from typing import Protocol

from ipufs.abi import icu
from ipufs.abi.icu import MESSAGE as icu_message
from ipufs.driver.arguments import U64, Arg, Arguments, Command
from ipufs.driver.devices import DeviceSet
from ipufs.fuse.errors import FUSEError


class MailboxDriver(Protocol):
    """What the mailbox's handlers use of the driver."""

    @property
    def devices(self) -> DeviceSet: ...

    @property
    def arguments(self) -> Arguments: ...


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
    request = icu_message.unpack_from(driver.arguments.take(tgid, arg, data, command, icu_message.size))
    driver.devices.ipus[ipu].icu_submit(request)
    return 0, b""


def write_read(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
               command: Command) -> tuple[int, bytes]:
    """MAILBOX_WRITE_READ: a request and its answer, in the argument."""
    model = driver.devices.ipus[ipu]
    arguments = driver.arguments
    request = icu_message.unpack_from(arguments.take(tgid, arg, data, command, icu_message.size))
    if model.icu.unresponsive:
        raise FUSEError(errno.ETIMEDOUT, "the ICU does not answer")
    response = model.icu.handle(request)
    # With _IOW (how aspen-sdk calls it) the answer still comes back in
    # the caller's buffer, as the real driver writes it there.
    return 0, arguments.give(tgid, arg, icu_message.pack(*(response or (0, 0, 0, 0, 0))), command)


def offsets(driver: MailboxDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
            command: Command) -> tuple[int, bytes]:
    """MAILBOX_GET_OFFSETS: where the rings are in the mailbox node."""
    if command.size < 16:
        answer = struct.pack("<II", icu.REQUEST_RING, icu.RESPONSE_RING)
    else:
        answer = struct.pack("<IIII", icu.REQUEST_RING, icu.SLOTS, icu.RESPONSE_RING, icu.SLOTS)
    return 0, driver.arguments.give(tgid, arg, answer, command)
