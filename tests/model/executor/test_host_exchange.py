# Host exchange (docs/exchange.md, "Host exchange"): the record's header
# vectors (osmarks/ipu-stack exchange.rs tests), and tile programs written
# as its runtime writes them (mux := the tile's host endpoint, sync 15,
# XREQ, the packets, sync 0, sync 7, mux := 0x640) moving data between
# tile memory and a fake host memory, on the native loop and without it;
# each error a packet or sync 0 can meet.
from __future__ import annotations

import re

import pytest

from ipufs.abi.registers import ExceptionCause
from ipufs.model import host_packets as hp
from ipufs.model.debug import TdiRegister
from ipufs.model.host_memory import HostRangeError
from ipufs.model.executor.state import ETYPE_MASK, ETYPE_SHIFT, Etype, Status
from ipufs.model.ipu import Ipu
from tests.model.executor.exchange_kit import assemble, ipu21, load, run, start, words
from tests.model.executor.kit import tdi_read

# (call, word 0, word 1): E 3477-3507, 3748-3755, 3793-3877 (c600-exchange.md, host-packet table)
VECTORS = [
    (hp.tile_to_host_header(0, 0x40, 64), 0xA0000000, 0x00000011),
    (hp.host_to_tile_header(0, 0x50120, 0x40, 64), 0xEC000209, 0x00000011),
    (hp.close_header(2, 0x50180), 0xCC01020C, 0x00000000),
    (hp.tile_to_host_header(1409, 0x40, 64), 0xA2C08000, 0x80000011),
    (hp.host_to_tile_header(0, 0x50180, 0x1000, 4), 0xCC00020C, 0x00004001),
    (hp.tile_to_host_header(260, 0x40, 64), 0xA0820000, 0x00000011),
    (hp.close_header(260, 0x50180), 0xCC82020C, 0x00000000),
    (hp.host_to_tile_header(260, 0x50120, 0x40, 64), 0xEC820209, 0x00000011),
    (hp.xreq_bitmap([260]), 0x100, 0), (hp.xreq_bitmap([0]), 1, 0), (hp.xreq_bitmap([31]), 2, 0),
    (hp.xreq_bitmap([81]), 4, 0), (hp.xreq_bitmap([768]), 0, 1), (hp.xreq_bitmap([1471]), 0, 1 << 21),
]


@pytest.mark.parametrize("got, word0, word1", VECTORS)
def test_the_records_header_vectors(got: tuple[int, int], word0: int, word1: int) -> None:
    assert got == (word0, word1)


def test_host_mux_and_xreq_tile() -> None:
    assert [hp.host_mux(p) for p in (116, 582, 1173)] == [0x634, 0x604, 0x615]
    assert hp.xreq_tile(260) == 4


def test_parse_gives_back_what_was_encoded() -> None:
    payload = list(range(1, 17))
    sent = [*hp.xreq_bitmap([1409]), *hp.tile_to_host_header(1409, 0x1040, 64), *payload,
            *hp.host_to_tile_header(1409, 0x53FC0, 0xFC0, 64, last=False), *hp.host_to_tile_header(1409, 0x50000, 0, 1024),
            *hp.close_header(1409, 0x50180)]
    assert hp.parse(sent, 1409) == [
        hp.Xreq(hp.xreq_bitmap([1409])), hp.HostWrite(0x1040, b"".join(w.to_bytes(4, "little") for w in payload)),
        hp.HostRead(0x53FC0, 0xFC0, 64), hp.HostRead(0x50000, 0, 1024), hp.HostRead(0x50180, 0, 0)]


@pytest.mark.parametrize("sent, message", [
    ([0x80000000], "a header is two words"),
    ([*hp.tile_to_host_header(0, 0, 8), 1], "2 words of payload, 1 sent"),
    ([*hp.tile_to_host_header(2, 0, 8), 1, 2], "another tile"),
    ([0x90000000, 0x11], "not a header"),
    ([0xA0000000, 0x15], "a write of 320 bytes"),
    ([0x80000000, 0x00000000], "a write of 0 bytes"),
    ([0xEC0003FF, 0x11], "0x53fe0 (+64 bytes)"),
    ([0xCC000200, (0xFFC >> 2) << 4 | 2], "crosses a 4096-byte host page"),
])
def test_parse_refuses(sent: list[int], message: str) -> None:
    with pytest.raises(hp.PacketError, match=re.escape(message)):
        hp.parse(sent, 0)


def test_encoding_refuses_sizes_the_rules_do_not_allow() -> None:
    for offset, length in ((0, 0), (0, 62), (0, 2048), (32, 64), (2, 4)):
        with pytest.raises(hp.PacketError):
            hp.tile_to_host_header(0, offset, length)
    with pytest.raises(hp.PacketError):
        hp.host_to_tile_header(0, 0x50010, 0, 4)


class FakeHostMemory:
    """``size`` bytes of host memory; a range beyond refuses."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)

    def _check(self, offset: int, length: int) -> None:
        if offset + length > len(self.data):
            raise HostRangeError(f"no attached buffer covers {offset}+{length}")

    def read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        return bytes(self.data[offset:offset + length])

    def write(self, offset: int, data: bytes) -> None:
        self._check(offset, len(data))
        self.data[offset:offset + len(data)] = data


TILE = 0  # physical 0: its own xreq tile
PACKETS, PAYLOAD = 0x60000, 0x60100
WRAP = """\
\tput $OUTGOING_BASE, $m15
\tsetzi $m8, {mux}
\tput $INCOMING_MUX, $m8
\tsync 15
\tsend 1, {xreq}, 3
{body}\tsync 7
\tsetzi $m8, 0x640
\tput $INCOMING_MUX, $m8
\tbr $m15
"""
TO_HOST = """\
\tsetzi $m8, 1
\tput $INCOMING_DCOUNT, $m8
\tsend 1, {header}, 3
\tsend 15, {payload}, 3
\tdelay 1
\tsend 1, {close}, 3
\tsync 0
"""
FROM_HOST = """\
\tsetzi $m8, {count}
\tput $INCOMING_DCOUNT, $m8
\tsend 1, {header}, 3
\tsync 0
"""


def _word_bytes(values: list[int]) -> bytes:
    return b"".join(v.to_bytes(4, "little") for v in values)


def _round_trip(native: bool | None, dcount: int = 16, host_offset: int = 0x40,
                size: int = 0x1000) -> tuple[Ipu, FakeHostMemory]:
    """Tile 0 writes 64 bytes to host offset ``host_offset``, then reads
    them back into 0x50120 (``dcount`` the words it counts on)."""
    ipu, host = ipu21(), FakeHostMemory(size)
    ipu.execution.exchange.host.memory = host
    ipu.execution.native = native
    packets = [*hp.xreq_bitmap([TILE]), *hp.tile_to_host_header(TILE, host_offset, 64),
               *hp.close_header(TILE, 0x50180), *hp.host_to_tile_header(TILE, 0x50120, host_offset, 64)]
    body = TO_HOST.format(header=(PACKETS + 8) >> 2, payload=PAYLOAD >> 2, close=(PACKETS + 16) >> 2) \
        + FROM_HOST.format(count=dcount, header=(PACKETS + 24) >> 2)
    load(ipu, TILE, 0x4C000, assemble(WRAP.format(mux=hp.host_mux(TILE), xreq=PACKETS >> 2, body=body)))
    load(ipu, TILE, PACKETS, _word_bytes(packets))
    load(ipu, TILE, PAYLOAD, _word_bytes([0x1000 + k for k in range(16)]))
    start(ipu, [TILE])
    run(ipu)
    return ipu, host


@pytest.mark.parametrize("native", [True, False])
def test_a_round_trip_tile_to_host_to_tile(native: bool) -> None:
    ipu, host = _round_trip(native)
    sent = [0x1000 + k for k in range(16)]
    assert host.data[0x40:0x80] == _word_bytes(sent) and not any(host.data[:0x40]) and not any(host.data[0x80:])
    assert words(ipu, TILE, 0x50120, 16) == sent
    t = ipu.execution.state(TILE)
    assert t.supervisor.status is Status.INACTIVE and ipu.exception is None
    assert t.supervisor.csrs[0xA0] == 0x640 and tdi_read(ipu, TILE, TdiRegister.CTXT_STS) == 0


def _excepted(ipu: Ipu, etype: Etype, erer: int) -> str:
    assert ipu.exception is not None and ipu.exception.cause == ExceptionCause.EXCHANGE
    t = ipu.execution.state(TILE)
    assert (t.supervisor.sr & ETYPE_MASK) >> ETYPE_SHIFT == etype
    assert t.receive_error == erer
    return str([e for e in ipu.execution.events if e.kind == "exception"][-1])


def test_sync_0_faults_when_the_words_are_not_dcount() -> None:
    ipu, host = _round_trip(True, dcount=15)
    assert "16 words arrived from the host, $INCOMING_DCOUNT is 15" in _excepted(ipu, Etype.EXERR, 0)
    assert host.data[0x40:0x44] == _word_bytes([0x1000])  # the write before went through


def test_a_host_range_no_buffer_covers_faults() -> None:
    ipu, host = _round_trip(True, host_offset=0x1000, size=0x1000)
    assert "host write to host offset 0x1000: no attached buffer covers" in _excepted(ipu, Etype.EXERR, 3)


def test_a_bad_packet_faults() -> None:
    ipu = ipu21()
    body = FROM_HOST.format(count=0, header=(PACKETS + 8) >> 2)
    load(ipu, TILE, 0x4C000, assemble(WRAP.format(mux=hp.host_mux(TILE), xreq=PACKETS >> 2, body=body)))
    load(ipu, TILE, PACKETS, _word_bytes([*hp.xreq_bitmap([TILE]), 0x90000000, 0x11]))
    start(ipu, [TILE])
    run(ipu)
    assert "not a header ipufs knows" in _excepted(ipu, Etype.EXCONF, 6)


def test_without_a_driver_no_buffer_is_attached() -> None:
    ipu = ipu21()
    ipu.execution.native = True
    packets = [*hp.xreq_bitmap([TILE]), *hp.tile_to_host_header(TILE, 0, 4), 7]
    body = "\tsend 2, {0}, 3\n\tsync 0\n".format((PACKETS + 8) >> 2)
    load(ipu, TILE, 0x4C000, assemble(WRAP.format(mux=hp.host_mux(TILE), xreq=PACKETS >> 2, body=body)))
    load(ipu, TILE, PACKETS, _word_bytes(packets))
    start(ipu, [TILE])
    run(ipu)
    assert "no buffers are attached" in _excepted(ipu, Etype.EXERR, 3)


def test_words_sent_with_the_neutral_mux_are_no_host_packets() -> None:
    ipu = ipu21()
    ipu.execution.exchange.host.memory = FakeHostMemory(0x1000)
    program = "\tput $OUTGOING_BASE, $m15\n\tsync 3\n\tsend 1, {0}, 3\n\tsync 0\n\tbr $m15\n".format(PACKETS >> 2)
    load(ipu, TILE, 0x4C000, assemble(program))
    load(ipu, TILE, PACKETS, _word_bytes([0x90000000, 0x11]))
    start(ipu, [TILE])
    run(ipu)
    assert ipu.exception is None and ipu.execution.state(TILE).supervisor.status is Status.INACTIVE


def test_a_read_in_two_packets_across_a_host_page_with_sendoff() -> None:
    """The runtime's plan for 128 bytes from host offset 0xfc0: a long
    packet up to the page's end, then one after it; one `send` of the
    first header, a `sendoff 1, 0, 3` for the next (E 1760-1797)."""
    ipu, host = ipu21(), FakeHostMemory(0x2000)
    host.data[0xFC0:0x1040] = _word_bytes([0xAB000000 + k for k in range(32)])
    ipu.execution.exchange.host.memory = host
    packets = [*hp.xreq_bitmap([TILE]), *hp.host_to_tile_header(TILE, 0x50200, 0xFC0, 64, last=False),
               *hp.host_to_tile_header(TILE, 0x50240, 0x1000, 64)]
    body = FROM_HOST.format(count=32, header=(PACKETS + 8) >> 2).replace("\tsync 0\n", "\tsendoff 1, 0, 3\n\tsync 0\n")
    load(ipu, TILE, 0x4C000, assemble(WRAP.format(mux=hp.host_mux(TILE), xreq=PACKETS >> 2, body=body)))
    load(ipu, TILE, PACKETS, _word_bytes(packets))
    start(ipu, [TILE])
    run(ipu)
    assert ipu.exception is None
    assert words(ipu, TILE, 0x50200, 32) == [0xAB000000 + k for k in range(32)]
    assert packets[2] & hp.STREAM_END == 0 and packets[4] & hp.STREAM_END == hp.STREAM_END
