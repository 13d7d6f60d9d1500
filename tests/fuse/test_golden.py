# Golden table of the FUSE wire format: each request record against the
# exact bytes /dev/fuse delivers, and each reply against the bytes ipufs
# writes, checked both ways (decode and encode). The hex was checked field
# by field against linux/fuse.h; a change here is a change of ABI.
from __future__ import annotations

import pytest

from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.decoding import decode
from ipufs.fuse.errors import ProtocolError
from tests.fuse import fakekernel as fk

C = rq.Context(1000, 1001, 4242)
HDR = "e8030000e903000092100000" "00000000"  # uid gid pid extlen+pad

REQUESTS = [
    (rq.Lookup(2, 1, C, b"ipu0_ex"),
     "30000000" "01000000" "0200000000000000" "0100000000000000" + HDR + "697075305f657800"),
    (rq.Getattr(4, 3, C, None),
     "38000000" "03000000" "0400000000000000" "0300000000000000" + HDR
     + "00000000" "00000000" "0000000000000000"),
    (rq.Open(6, 2, C, 0o2),
     "30000000" "0e000000" "0600000000000000" "0200000000000000" + HDR + "02000000" "00000000"),
    (rq.Read(8, 2, C, 7, 4096, 64, 0o2),
     "50000000" "0f000000" "0800000000000000" "0200000000000000" + HDR
     + "0700000000000000" "0010000000000000" "40000000" "00000000" "0000000000000000"
     "02000000" "00000000"),
    (rq.Write(10, 2, C, 7, 16, memoryview(b"\x01\x02\x03\x04"), 0, 0o2),
     "54000000" "10000000" "0a00000000000000" "0200000000000000" + HDR
     + "0700000000000000" "1000000000000000" "04000000" "00000000" "0000000000000000"
     "02000000" "00000000" "01020304"),
    (rq.Ioctl(12, 2, C, 7, 0, 0xC008ED0A, 0, memoryview(bytes(8)), 8),
     "50000000" "27000000" "0c00000000000000" "0200000000000000" + HDR
     + "0700000000000000" "00000000" "0aed08c0" "0000000000000000" "08000000" "08000000"
     "0000000000000000"),
    (rq.Forget(0, 3, C, 5),
     "30000000" "02000000" "0000000000000000" "0300000000000000" + HDR + "0500000000000000"),
    (rq.Interrupt(14, 0, C, 12),
     "30000000" "24000000" "0e00000000000000" "0000000000000000" + HDR + "0c00000000000000"),
]


@pytest.mark.parametrize("record,hexdata", REQUESTS, ids=lambda v: type(v).__name__ if not isinstance(v, str) else "")
def test_request_decodes(record: rq.Request, hexdata: str) -> None:
    assert decode(bytes.fromhex(hexdata)) == record


@pytest.mark.parametrize("record,hexdata", REQUESTS, ids=lambda v: type(v).__name__ if not isinstance(v, str) else "")
def test_request_encodes(record: rq.Request, hexdata: str) -> None:
    assert fk.encode(record).hex() == hexdata


@pytest.mark.parametrize("record,hexdata", REQUESTS, ids=lambda v: type(v).__name__ if not isinstance(v, str) else "")
def test_trailing_or_missing_bytes_are_protocol_errors(record: rq.Request, hexdata: str) -> None:
    data = bytes.fromhex(hexdata)
    with pytest.raises(ProtocolError) as info:
        decode(data + b"\0")
    assert info.value.unique == record.unique
    with pytest.raises(ProtocolError):
        decode(data[:-1])


REPLIES = [
    (rp.Opened(7, 0x81, 3), "20000000" "00000000" "1400000000000000" "0700000000000000" "81000000" "03000000"),
    (rp.Written(4), "18000000" "00000000" "1400000000000000" "04000000" "00000000"),
    (rp.IoctlReply(0, b"\x2a" + bytes(7)),
     "28000000" "00000000" "1400000000000000" "00000000" "00000000" "00000000" "00000000"
     "2a00000000000000"),
    (rp.XattrSize(11), "18000000" "00000000" "1400000000000000" "0b000000" "00000000"),
    (rp.PollReply(5), "18000000" "00000000" "1400000000000000" "05000000" "00000000"),
    (rp.Entry(rp.Attr(ino=3, mode=0o100660, size=1 << 20, atime_ns=1_500_000_000,
                      mtime_ns=1_500_000_000, ctime_ns=1_500_000_000, blocks=2048)),
     "90000000" "00000000" "1400000000000000"
     "0300000000000000" "0000000000000000" "0100000000000000" "0100000000000000" "00000000" "00000000"
     "0300000000000000" "0000100000000000" "0008000000000000" "0100000000000000" "0100000000000000"
     "0100000000000000" "0065cd1d" "0065cd1d" "0065cd1d" "b0810000" "01000000" "00000000" "00000000"
     "00000000" "00100000" "00000000"),
]


@pytest.mark.parametrize("reply,hexdata", REPLIES, ids=lambda v: type(v).__name__ if not isinstance(v, str) else "")
def test_reply_encodes(reply: rp.Reply, hexdata: str) -> None:
    assert rp.frame(20, reply.encode()).hex() == hexdata


@pytest.mark.parametrize("reply,hexdata", REPLIES, ids=lambda v: type(v).__name__ if not isinstance(v, str) else "")
def test_reply_decodes_as_the_kernel_reads_it(reply: rp.Reply, hexdata: str) -> None:
    decoded = fk.decode_reply(bytes.fromhex(hexdata))
    assert (decoded.unique, decoded.error, decoded.payload) == (20, 0, reply.encode())


def test_error_reply_carries_negated_errno() -> None:
    assert rp.frame(22, error=2).hex() == "10000000" "feffffff" "1600000000000000"


def test_dirent_is_padded_to_eight_bytes() -> None:
    data = rp.encode_dirents([rp.DirEntry(2, b"ipu0", 0o100000, 3)], 4096)
    assert data.hex() == "0200000000000000" "0300000000000000" "04000000" "08000000" "6970753000000000"
    # A buffer too small for the next record stops the listing there.
    assert rp.encode_dirents([rp.DirEntry(2, b"ipu0", 0o100000, 3)], 31) == b""


def test_struct_sizes_match_the_kernel() -> None:
    sizes = {
        "IN_HEADER": 40, "OUT_HEADER": 16, "ATTR": 88, "KSTATFS": 80, "SETATTR_IN": 88,
        "INIT_IN": 64, "INIT_OUT": 64, "OPEN_OUT": 16, "READ_IN": 40, "WRITE_IN": 40,
        "IOCTL_IN": 32, "IOCTL_OUT": 16, "POLL_IN": 24, "LK_IN": 48, "RELEASE_IN": 24,
        "BACKING_MAP": 16,
    }
    assert {name: getattr(abi, name).size for name in sizes} == sizes
    assert abi.DEV_IOC_BACKING_OPEN == 0x4010E501


#: A body one byte short of the fixed part of its opcode's struct, and the
#: error the core reports (linux/fuse.h sizes, written out here).
SHORT_BODIES = [
    (abi.Opcode.INIT, 16), (abi.Opcode.FORGET, 8), (abi.Opcode.BATCH_FORGET, 8), (abi.Opcode.GETATTR, 16),
    (abi.Opcode.SETATTR, 88), (abi.Opcode.MKNOD, 16), (abi.Opcode.MKDIR, 8), (abi.Opcode.RENAME2, 16),
    (abi.Opcode.LINK, 8), (abi.Opcode.OPEN, 8), (abi.Opcode.CREATE, 16), (abi.Opcode.READ, 40),
    (abi.Opcode.WRITE, 40), (abi.Opcode.RELEASE, 24), (abi.Opcode.FLUSH, 24), (abi.Opcode.FSYNC, 16),
    (abi.Opcode.SETXATTR, 8), (abi.Opcode.GETXATTR, 8), (abi.Opcode.ACCESS, 8), (abi.Opcode.INTERRUPT, 8),
    (abi.Opcode.BMAP, 16), (abi.Opcode.IOCTL, 32), (abi.Opcode.POLL, 24), (abi.Opcode.FALLOCATE, 32),
    (abi.Opcode.LSEEK, 24), (abi.Opcode.COPY_FILE_RANGE, 56), (abi.Opcode.GETLK, 48),
]


@pytest.mark.parametrize("opcode,size", SHORT_BODIES, ids=lambda v: v.name if isinstance(v, abi.Opcode) else "")
def test_a_short_body_is_reported_with_the_size_it_needed(opcode: abi.Opcode, size: int) -> None:
    body = bytes(size - 1)
    message = abi.IN_HEADER.pack(abi.IN_HEADER.size + len(body), opcode, 0x77, 1, 0, 0, 1, 0, 0) + body
    with pytest.raises(ProtocolError) as info:
        decode(message)
    assert info.value.unique == 0x77
    assert str(info.value) == f"body of {size - 1} bytes, expected at least {size}"
