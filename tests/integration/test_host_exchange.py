# Host exchange through a real mount (docs/exchange.md, "Host exchange"):
# a client process attaches two 4 KiB buffers with ATTACH_BUFFER and runs
# a tile program written as the C600's runtime writes one (mux := the
# tile's host endpoint, sync 15, XREQ, a tile->host write padded to 18
# events and closed, sync 0, a host->tile read, sync 0, sync 7, mux :=
# 0x640): the tile's words arrive in the second buffer, and the words the
# host put there arrive in the tile's window.
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs import cli
from ipufs.model import host_packets as hp
from tests.integration.harness import ROOT, RunningDaemon, running_daemon

pytestmark = pytest.mark.mount

TILE = 0  # physical 0 on the C600's map: its own XREQ tile
TO_HOST, FROM_HOST, WINDOW = 0x1100, 0x1040, 0x50120  # host offsets in the data page (from 0x1000), tile address
PROGRAM = """\
    .text 0x4c000
    .supervisor
    .globl _start
_start:
    put   $OUTGOING_BASE, $m15      # sends name absolute word addresses
    setzi $m8, {mux}
    put   $INCOMING_MUX, $m8        # the tile's host endpoint
    sync  15
    send  1, xreq >> 2, 3
    setzi $m8, 1
    put   $INCOMING_DCOUNT, $m8     # the close's answer
    send  1, write >> 2, 3
    send  15, payload >> 2, 3       # 16 words to the host
    delay 1                         # 18 events for the payload
    send  1, close >> 2, 3
    sync  0
    setzi $m8, 16
    put   $INCOMING_DCOUNT, $m8     # the 16 words read
    send  1, read >> 2, 3
    sync  0
    sync  7
    setzi $m8, 0x640
    put   $INCOMING_MUX, $m8
    br    $m15
    .data 0x60000
xreq:    .word {xreq}
write:   .word {write}
close:   .word {close}
read:    .word {read}
payload: .word {payload}
"""
PAYLOAD = [0xC0DE0000 + k for k in range(16)]
HOST = [0xF00D0000 + k for k in range(32)]


def _words(values: tuple[int, ...] | list[int]) -> str:
    return ", ".join(f"0x{v:08x}" for v in values)


@pytest.fixture
def c600(tmp_path: Path) -> Iterator[RunningDaemon]:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu21") as d:
        yield d


def test_a_tile_writes_to_and_reads_from_the_attached_buffers(c600: RunningDaemon, tmp_path: Path) -> None:
    source = PROGRAM.format(mux=hp.host_mux(TILE), xreq=_words(hp.xreq_bitmap([TILE])),
                            write=_words(hp.tile_to_host_header(TILE, TO_HOST, 64)),
                            close=_words(hp.close_header(TILE, 0x50180)),
                            read=_words(hp.host_to_tile_header(TILE, WINDOW, FROM_HOST, 64)), payload=_words(PAYLOAD))
    (tmp_path / "host.s").write_text(source)
    assert cli.main(["asm", "--arch", "ipu21", str(tmp_path / "host.s"), "-o", str(tmp_path / "host.elf")]) == 0
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "integration" / "host_exchange_client.py"),
                           str(c600.mountpoint), str(tmp_path / "host.elf"), str(TILE), *map(hex, HOST)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    host, tile = (bytes.fromhex(line.split(": ")[1]) for line in done.stdout.splitlines())

    def as_bytes(values: list[int]) -> bytes:
        return b"".join(v.to_bytes(4, "little") for v in values)

    assert host[0x100:0x140] == as_bytes(PAYLOAD)  # host offset 0x1100: the data page's 0x100
    assert host[:0x80] == as_bytes(HOST) and not any(host[0x80:0x100]) and not any(host[0x140:])
    assert tile[0x120:0x160] == as_bytes(HOST[0x10:0x20])  # host offset 0x1040 = HOST[16:32]
    assert not any(tile[:0x120]) and not any(tile[0x160:])
