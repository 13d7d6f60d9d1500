# Host exchange packets as a C600's tiles send them: the header words of
# tile->host writes, host->tile read requests and the zero-byte "close"
# read, the XREQ bitmap, and the size rules, from osmarks/ipu-stack
# crates/ipu-target/src/exchange.rs (constants 13-33; headers 1833-1891,
# 2107-2146; programs 1691-2055). Encoding and decoding are pure: what a
# tile's sends mean here, and what ipufs refuses, is ipufs's own where the
# record is silent (docs/exchange.md, "Host exchange").
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: where host->tile data may land: 0x50000..0x53fff, 32-byte aligned
WINDOW_BASE, WINDOW_BYTES = 0x50000, 0x4000
#: a short packet carries 4..60 bytes (a multiple of 4), a long one 64..1024 (a multiple of 64)
SHORT_MAX, LONG_MAX = 60, 1024
#: the largest tile->host payload; no packet crosses a host page
TILE_TO_HOST_MAX, HOST_PAGE = 256, 4096
#: the multiplexer's host endpoints (0x600 + ...) and its neutral value (TILE_MUX_EXCHANGE: it selects nothing)
HOST_MUX, NEUTRAL = 0x600, 0x640
#: set in word 0 of the last header of a host->tile stream only
STREAM_END = 0x0C000000
_WRITE, _READ, _LONG, _READ_MARK = 0x80000000, 0xC0000200, 0x20000000, 0x200
_ROUTE0 = 0x03FF8000  # word 0: the physical tile (below 2048), (p >> 1) << 16 | (p & 1) << 15


class PacketError(ValueError):
    """Raised for words a tile sent to the host that are no packet ipufs
    takes: an unknown header, a size the rules refuse, a packet cut short,
    a route naming another tile."""


def host_mux(physical: int) -> int:
    """The multiplexer value with which physical tile ``physical`` listens to the host."""
    return HOST_MUX + (physical & 0x3F & ~2)


def xreq_tile(physical: int) -> int:
    """The physical tile that sends the XREQ bitmap for target ``physical``."""
    return physical & 0x3D


def xreq_bitmap(targets: Sequence[int]) -> tuple[int, int]:
    """The two XREQ words naming physical tiles ``targets``."""
    bits = 0
    for p in targets:
        bits |= 1 << (2 * (p >> 6) + ((p >> 1) & 1))
    return bits & 0xFFFFFF, bits >> 24


def _route(physical: int) -> tuple[int, int]:
    return (physical >> 1) << 16 | (physical & 1) << 15, (physical & 1) << 31


def _long(host_offset: int, length: int) -> bool:
    if 4 <= length <= SHORT_MAX and not host_offset % 4 and not length % 4:
        return False
    if 64 <= length <= LONG_MAX and not host_offset % 64 and not length % 64:
        return True
    raise PacketError(f"{length} bytes at host offset 0x{host_offset:x}: no packet carries that "
                      f"(short: 4..{SHORT_MAX} bytes, 4-aligned; long: 64..{LONG_MAX}, 64-aligned)")


def _addrlen(host_offset: int, length: int, long: bool) -> int:
    shift = 6 if long else 2
    units = 0 if long and length == LONG_MAX else length >> shift
    encoded = (host_offset >> shift) << 4 | units
    if encoded > 0x7FFFFFFF:
        raise PacketError(f"host offset 0x{host_offset:x} does not fit a header")
    return encoded


def tile_to_host_header(physical: int, host_offset: int, length: int) -> tuple[int, int]:
    """Word 0 and 1 of a write of ``length`` bytes to host offset ``host_offset``."""
    long = _long(host_offset, length)
    r0, r1 = _route(physical)
    return _WRITE | (_LONG if long else 0) | r0, r1 | _addrlen(host_offset, length, long)


def host_to_tile_header(physical: int, address: int, host_offset: int, length: int,
                        last: bool = True) -> tuple[int, int]:
    """Word 0 and 1 of a request for ``length`` bytes of host offset
    ``host_offset`` into tile address ``address``; ``last``: the stream's
    last header."""
    _check_window(address, 0)
    long = _long(host_offset, length)
    r0, r1 = _route(physical)
    word0 = _READ | (STREAM_END if last else 0) | (_LONG if long else 0) | r0 | (address - WINDOW_BASE) >> 5
    return word0, r1 | _addrlen(host_offset, length, long)


def close_header(physical: int, address: int) -> tuple[int, int]:
    """Word 0 and 1 of the zero-byte read that ends a tile->host transfer."""
    _check_window(address, 0)
    r0, r1 = _route(physical)
    return _READ | STREAM_END | r0 | (address - WINDOW_BASE) >> 5, r1


def _check_window(address: int, length: int) -> None:
    if address % 32 or not WINDOW_BASE <= address or address + length > WINDOW_BASE + WINDOW_BYTES:
        raise PacketError(f"tile address 0x{address:x} (+{length} bytes): host->tile data land at "
                          f"0x{WINDOW_BASE:x}..0x{WINDOW_BASE + WINDOW_BYTES - 1:x}, 32-byte aligned")


@dataclass(frozen=True, slots=True)
class HostWrite:
    """A tile->host write: ``data`` at host offset ``host_offset``."""

    host_offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class HostRead:
    """A host->tile read request: ``length`` bytes of host offset
    ``host_offset`` to tile address ``address``; length 0 is the close."""

    address: int
    host_offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Xreq:
    """An XREQ bitmap (words 0 and 1)."""

    bitmap: tuple[int, int]


Packet = HostWrite | HostRead | Xreq


def _size(word1: int, long: bool, what: str) -> tuple[int, int]:
    """(host offset, bytes) of word 1."""
    shift, units = (6, word1 & 0xF or 16) if long else (2, word1 & 0xF)
    host_offset, length = ((word1 & 0x7FFFFFFF) >> 4) << shift, units << shift
    if host_offset // HOST_PAGE != (host_offset + max(length, 1) - 1) // HOST_PAGE:
        raise PacketError(f"{what} of {length} bytes at host offset 0x{host_offset:x} crosses a "
                          f"{HOST_PAGE}-byte host page")
    return host_offset, length


def parse(words: Sequence[int], physical: int) -> list[Packet]:
    """The packets physical tile ``physical`` sent as ``words``; raises PacketError."""
    out: list[Packet] = []
    r0, r1 = _route(physical)
    i = 0
    while i < len(words):
        if i + 2 > len(words):
            raise PacketError(f"word {i} (0x{words[i]:08x}): a header is two words; the sends ended after one")
        w0, w1 = words[i], words[i + 1]
        at = f"header {w0:08x} {w1:08x} (word {i})"
        i += 2
        if not w0 & _WRITE:
            out.append(Xreq((w0, w1)))
            continue
        if w0 & _ROUTE0 != r0 or w1 & 0x80000000 != r1:
            raise PacketError(f"{at}: its route names another tile than physical {physical} (ipufs takes a "
                              "tile's own packets only)")
        long = bool(w0 & _LONG)
        rest = w0 & ~(_ROUTE0 | _LONG)
        if rest == _WRITE:
            host_offset, length = _size(w1, long, at)
            if length == 0 or length > TILE_TO_HOST_MAX:
                raise PacketError(f"{at}: a write of {length} bytes (tile->host: 4..{TILE_TO_HOST_MAX})")
            n = length // 4
            if i + n > len(words):
                raise PacketError(f"{at}: {n} words of payload, {len(words) - i} sent")
            out.append(HostWrite(host_offset, b"".join(w.to_bytes(4, "little") for w in words[i:i + n])))
            i += n
        elif rest & ~(STREAM_END | 0x1FF) == _READ and rest & STREAM_END in (0, STREAM_END):
            host_offset, length = _size(w1, long, at)
            address = WINDOW_BASE + ((w0 & 0x1FF) << 5)
            try:
                _check_window(address, length)
            except PacketError as exc:
                raise PacketError(f"{at}: {exc}") from None
            out.append(HostRead(address, host_offset, length))
        else:
            raise PacketError(f"{at}: not a header ipufs knows (tile->host 0x80000000/0xa0000000, "
                              "host->tile 0xcc000200/0xec000200, with the route)")
    return out
