# The ioctls a runtime that drives a real C600 makes at bring-up besides
# ATTACH, SET_IPU_ID and RESET (osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs, Device::initialize): STOP_MONITORING,
# START_MONITORING, ACCUMULATE_ERRORS, SET_HEXOPT_IDENTITY_TABLE and
# SET_SECONDARY_IPU_ID. Their numbers and calling forms were observed on
# hardware; what they do is ipufs's own (docs/abi.md): monitoring and the
# error total are the model's (ipufs/model/monitoring.py), the secondary
# id the attachment's. Each is a handler of the driver's ioctl table
# (driver.IOCTL_ROLES) over what it uses of the driver.
from __future__ import annotations

import errno
import logging
import struct
from typing import Protocol

from ipufs.driver.arguments import Arg, Arguments, Command
from ipufs.driver.attachments import Attachment
from ipufs.driver.devices import DeviceSet
from ipufs.fuse.errors import FUSEError

log = logging.getLogger(__name__)


class DeviceDriver(Protocol):
    """What these ioctls use of the driver."""

    @property
    def devices(self) -> DeviceSet: ...

    @property
    def arguments(self) -> Arguments: ...

    def check_change(self, ipu: int, fh: int, what: str) -> None: ...

    def caller_attachment(self, ipu: int, tgid: int) -> Attachment: ...


def stop_monitoring(driver: DeviceDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
                    command: Command) -> tuple[int, bytes]:
    """STOP_MONITORING: the IPU counts no errors and samples no utilisation."""
    driver.check_change(ipu, fh, "stop its monitoring")
    driver.devices.ipus[ipu].monitoring.stop()
    return 0, b""


def start_monitoring(driver: DeviceDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
                     command: Command) -> tuple[int, bytes]:
    """START_MONITORING: counting and sampling go on."""
    driver.check_change(ipu, fh, "start its monitoring")
    driver.devices.ipus[ipu].monitoring.start()
    return 0, b""


def accumulate_errors(driver: DeviceDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
                      command: Command) -> tuple[int, bytes]:
    """ACCUMULATE_ERRORS: the errors counted since the last call join the
    IPU's accumulated total."""
    driver.check_change(ipu, fh, "accumulate its errors")
    folded = driver.devices.ipus[ipu].monitoring.accumulate()
    if folded:
        log.info("IPU %d: %d errors accumulated", ipu, folded)
    return 0, b""


def set_hexopt_identity_table(driver: DeviceDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
                              command: Command) -> tuple[int, bytes]:
    """SET_HEXOPT_IDENTITY_TABLE: ipufs's host exchange translates no
    address, so its table is the identity already; the call is refused as
    other changes of the IPU are, and otherwise changes nothing."""
    driver.check_change(ipu, fh, "set its host exchange table")
    return 0, b""


def set_secondary_ipu_id(driver: DeviceDriver, ipu: int, fh: int, tgid: int, arg: int, data: Arg,
                         command: Command) -> tuple[int, bytes]:
    """SET_SECONDARY_IPU_ID: a u32, by value (size 0) or at the argument
    (only its 4 bytes, whatever the encoded size)."""
    att = driver.caller_attachment(ipu, tgid)
    if command.size == 0:
        if arg & 0xFFFF_FFFF_FFFF_FFFF > 0xFFFF_FFFF:
            raise FUSEError(errno.EINVAL, "SET_SECONDARY_IPU_ID takes a u32")
        att.secondary_ipu_id = arg
    else:
        att.secondary_ipu_id = struct.unpack("<I", driver.arguments.take(tgid, arg, data, command, 4))[0]
    return 0, b""
