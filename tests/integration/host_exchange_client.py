# A host that lets one tile move data to and from its own memory by host
# exchange packets (docs/exchange.md, "Host exchange"), as the C600's
# runtime lays it out: two 4 KiB buffers attached with ATTACH_BUFFER (the
# command page, then the data page: host offsets 0x1000 on are the data
# page's), the tile's program loaded and started through the TDI, the
# driver's signals read from a signalfd. Run as `python
# host_exchange_client.py ROOT ELF TILE HOST_WORDS...`: HOST_WORDS go into
# the data page from its start; prints the data page's first 0x200 bytes
# and the tile's 0x50000..0x50200 as hex, or the exception, and exits 0
# when the tile finished.
from __future__ import annotations

import mmap
import sys
import time

from ipufs.abi.elf import read_elf
from ipufs.client import Device, SignalReceiver
from ipufs.client.execution import context_status
from ipufs.client.loader import read_memory

INACTIVE = 0


def main() -> int:
    signals = SignalReceiver(restore_mask=False)
    root, elf, tile, *host_words = sys.argv[1:]
    pages = [mmap.mmap(-1, 4096), mmap.mmap(-1, 4096)]
    pages[1][:4 * len(host_words)] = b"".join(int(w, 0).to_bytes(4, "little") for w in host_words)
    with Device(0, root) as device:
        device.attach()
        for page in pages:
            device.attach_buffer(memoryview(page))
        with open(elf, "rb") as f:
            image = f.read()
        device.load_elf(image, [int(tile)])
        device.start(read_elf(image).entry, [int(tile)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = [s.signo for s in signals.receive(timeout=0.05)]
            if 44 in got:
                print(f"exception: cause {device.read_register('EXC_CAUSE')} tile {device.read_register('EXC_TILE')}")
                return 1
            if all(s == INACTIVE for s in context_status(device, int(tile))):
                print("host:", pages[1][:0x200].hex())
                print("tile:", read_memory(device, int(tile), 0x50000, 0x200).hex())
                return 0
        print("timeout")
        return 2


if __name__ == "__main__":
    sys.exit(main())
