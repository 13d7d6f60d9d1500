# The device ABI of the emulated Graphcore PCIe driver, as one table: ioctl
# numbers and the encodings accepted for each, the signals, the argument
# structs. native/include/ipufs/ipu.h and the tables of docs/abi.md are
# generated from here (scripts/generate_abi.py) and checked by tests.
#
# Facts (aspen/sdk/src/driver/ioctls.rs of the public research repository
# github.com/Saghetti0/graphcore-ipu-research): type byte 0xED, the numbers, the
# signals 44..49 and their names. The reverse engineers' direction and size
# guesses are only guesses, so requests are matched on (type, nr) and take
# their sizes from _IOC_SIZE: every encoding FUSE can carry is served
# (ipufs/driver/driver.py says how). The encodings listed here are the one
# ipu.h defines and those known clients use; anything else is ipufs's own.
# The numbers 18, 34..36, 44 and 47, and the forms in which a runtime that
# drives a real C600 calls 10..47 (BUFFER_ATTACH's 16-byte struct with an
# index the caller picks, BUFFER_DETACH's index by value, MAILBOX_WRITE_READ's
# pair of pointers), were observed on hardware: osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs. What 34..36, 44 and 47 do is ipufs's own.
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from ipufs.abi.icu import op_name

IOCTL_TYPE = 0xED


class Dir(enum.IntFlag):
    """_IOC_DIR bits, from the caller's point of view."""

    NONE = 0
    WRITE = 1  # caller -> driver (_IOW)
    READ = 2  # driver -> caller (_IOR)
    READ_WRITE = 3  # _IOWR


def ioc(direction: int, nr: int, size: int, type_: int = IOCTL_TYPE) -> int:
    return (direction << 30) | (size << 16) | (type_ << 8) | nr


def ioc_fields(cmd: int) -> tuple[int, int, int, int]:
    """(direction, type, nr, size) of an ioctl command number."""
    return (cmd >> 30) & 3, (cmd >> 8) & 0xFF, cmd & 0xFF, (cmd >> 16) & 0x3FFF


@dataclass(frozen=True, slots=True)
class Encoding:
    direction: Dir
    size: int

    def cmd(self, nr: int) -> int:
        return ioc(self.direction, nr, self.size)


# struct ipufs_buffer: the argument of ATTACH_BUFFER (ipufs's own layout).
BUFFER = struct.Struct("<QQQQ")  # address length id(out) flags
#: The real driver's BUFFER_ATTACH argument: u32 index (the caller's
#: choice), u32 size, u64 address.
REAL_BUFFER = struct.Struct("<IIQ")
#: An ICU message: 5 x u32 (ipufs/abi/icu.py has the wire format).
ICU_MESSAGE = struct.Struct("<5I")
#: The real driver's MAILBOX_WRITE_READ argument: where the request is,
#: where the answer goes (two u64 pointers to 5 x u32).
MESSAGE_POINTERS = struct.Struct("<QQ")


class Shown(enum.Enum):
    """How a trace shows an ioctl's argument (ipufs/driver/events.py)."""

    NOTHING = "nothing"
    ID = "the argument value, an id"
    VALUE = "a u64 the kernel carried, in hex"
    BUFFER = "struct ipufs_buffer"
    ICU_MESSAGE = "an ICU request"

    def read(self, arg: int, data: bytes) -> dict[str, object]:
        """The fields a trace shows of argument ``arg`` carrying ``data``
        (what is not there is left out)."""
        if self is Shown.ID:
            return {"id": arg}
        if self is Shown.VALUE and len(data) in (4, 8):
            return {"value": hex(int.from_bytes(data, "little"))}
        if self is Shown.BUFFER and len(data) == BUFFER.size:
            address, length, _, flags = BUFFER.unpack(data)
            return {"address": hex(address), "length": length, "flags": flags}
        if self is Shown.BUFFER and len(data) == 8:  # the real driver's struct: its index and size
            return {"index": data[0] | data[1] << 8 | data[2] << 16 | data[3] << 24,
                    "length": int.from_bytes(data[4:], "little")}
        if self is Shown.ICU_MESSAGE and len(data) >= ICU_MESSAGE.size:
            words = ICU_MESSAGE.unpack_from(data)
            return {"icu_op": op_name(words[0]), "words": [hex(w) for w in words]}
        return {}


@dataclass(frozen=True, slots=True)
class IoctlSpec:
    name: str
    nr: int
    #: Encodings worth naming: the first is the one ipu.h defines, the
    #: others those known clients use (every other one is served too).
    encodings: tuple[Encoding, ...]
    argument: str
    summary: str
    #: Whether it changes the device, and so needs a file opened for
    #: writing, as a driver checks FMODE_WRITE (docs/abi.md).
    needs_write: bool = True
    #: How a trace shows its argument.
    shown: Shown = Shown.NOTHING

    @property
    def cmd(self) -> int:
        return self.encodings[0].cmd(self.nr)


BUFFER_FIELDS = (("uint64_t", "address", "start of the buffer in the caller's memory"),
                 ("uint64_t", "length", "its length in bytes"),
                 ("uint64_t", "id", "out: the buffer's id, for DETACH_BUFFER"),
                 ("uint64_t", "flags", "IPUFS_BUFFER_* (0: device may read and write)"))
BUFFER_DEVICE_READS = 1
BUFFER_DEVICE_WRITES = 2
MAX_BUFFERS = 64
MAX_BUFFER_LENGTH = 1 << 30

W, R, RW, NONE = Dir.WRITE, Dir.READ, Dir.READ_WRITE, Dir.NONE

IOCTLS: tuple[IoctlSpec, ...] = (
    IoctlSpec("ATTACH", 10, (Encoding(NONE, 0), Encoding(RW, 8)),
              "none: any argument is ignored and left as it is",
              "attach the calling process to the IPU"),
    IoctlSpec("ATTACH_BUFFER", 11, (Encoding(RW, BUFFER.size), Encoding(RW, 8)),
              "struct ipufs_buffer (its id written back); with 8 bytes (the real driver's BUFFER_ATTACH): "
              "a pointer to {u32 index; u32 size; u64 address}, the index the caller's choice",
              "let the device read and write a buffer of the caller", shown=Shown.BUFFER),
    IoctlSpec("DETACH_BUFFER", 12, (Encoding(W, 8), Encoding(RW, 8)),
              "u64: a buffer id or index (with size 0: the argument value; under ipufs run, _IOWR size 8 "
              "with a value below 0x10000, the real driver's BUFFER_DETACH, is that value)", "withdraw a buffer",
              shown=Shown.VALUE),
    IoctlSpec("SET_IPU_ID", 14, (Encoding(RW, 0), Encoding(NONE, 0)),
              "the argument value itself: the id (an int)",
              "set the id sent back in si_int of every signal", shown=Shown.ID),
    IoctlSpec("BUFFER_DETACH_ALL", 18, (Encoding(NONE, 0),),
              "none", "withdraw every buffer of the attachment (the real driver's BUFFER_DETACH_ALL)"),
    IoctlSpec("MASK_INTERRUPT", 22, (Encoding(RW, 8), Encoding(W, 8)),
              "u64: IPUFS_INT_* bits to mask (with size 0: the argument value); "
              "written back (_IOR, _IOWR): the mask in force",
              "mask interrupt sources (raised ones stay pending)", shown=Shown.VALUE),
    IoctlSpec("UNMASK_INTERRUPT", 23, (Encoding(RW, 8), Encoding(W, 8)),
              "u64: IPUFS_INT_* bits to unmask (with size 0: the argument value); "
              "written back (_IOR, _IOWR): the mask in force",
              "unmask interrupt sources, delivering what is pending", shown=Shown.VALUE),
    IoctlSpec("MAILBOX_READ_ONLY", 29, (Encoding(R, 20), Encoding(R, 24), Encoding(R, 8)),
              "5 x u32 (20 bytes, or 24 padded): filled with the next ICU response; "
              "with 8 bytes: a u64, the number of responses waiting",
              "take the next response from the ICU's response ring (EAGAIN: none)",
              needs_write=False),
    # An ICU request that only reads the board may be sent on any open; one
    # that changes it needs a file opened for writing (docs/abi.md).
    IoctlSpec("MAILBOX_WRITE_ONLY", 30, (Encoding(W, 20), Encoding(W, 24)),
              "5 x u32: an ICU request", "send a request; its answer is queued and rings the doorbell",
              needs_write=False, shown=Shown.ICU_MESSAGE),
    IoctlSpec("MAILBOX_WRITE_READ", 31, (Encoding(RW, 20), Encoding(RW, 24), Encoding(W, 24), Encoding(RW, 8)),
              "5 x u32: an ICU request, replaced by its answer; with 8 bytes (the real driver's form): a pointer "
              "to {const u32 (*sent)[5]; u32 (*received)[5]}",
              "send a request and get its answer at once (not queued, no doorbell)",
              needs_write=False, shown=Shown.ICU_MESSAGE),
    IoctlSpec("MAILBOX_GET_OFFSETS", 32, (Encoding(R, 8), Encoding(R, 16)),
              "u64: request ring offset | response ring offset << 32; with 16 bytes: "
              "u32 request offset, request slots, response offset, response slots",
              "where the rings are in the mailbox node", needs_write=False),
    IoctlSpec("STOP_MONITORING", 34, (Encoding(NONE, 0),), "none",
              "stop counting errors and sampling utilisation"),
    IoctlSpec("START_MONITORING", 35, (Encoding(NONE, 0),), "none",
              "count errors and sample utilisation again"),
    IoctlSpec("ACCUMULATE_ERRORS", 36, (Encoding(NONE, 0),), "none",
              "add the errors counted since the last call to the IPU's accumulated total"),
    IoctlSpec("SET_HEXOPT_IDENTITY_TABLE", 44, (Encoding(NONE, 0),), "none",
              "make the host exchange table the identity (ipufs's always is: nothing changes)"),
    IoctlSpec("RESET", 45, (Encoding(W, 4), Encoding(NONE, 0)),
              "int, ignored (by value or by pointer)", "reset the IPU's device state; attachments stay"),
    IoctlSpec("SET_SECONDARY_IPU_ID", 47, (Encoding(W, 4), Encoding(W, 8)),
              "u32 (with size 0: the argument value; with 8 bytes, the real driver's form, the pointer is to "
              "a u32 and only its 4 bytes count)", "set the attachment's secondary IPU id", shown=Shown.VALUE),
)

BY_NR: dict[int, IoctlSpec] = {s.nr: s for s in IOCTLS}
BY_NAME: dict[str, IoctlSpec] = {s.name: s for s in IOCTLS}
