# bar_client in Python: the same line protocol as tests/c/bar_client.c.
from __future__ import annotations

import mmap
import os
import sys


def main() -> int:
    fd = os.open(sys.argv[1], os.O_RDWR)
    size = os.fstat(fd).st_size
    bar = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    print(f"size {size}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["w"]:
            offset, data = int(words[1]), bytes.fromhex(words[2])
            bar[offset : offset + len(data)] = data
            start = offset - offset % mmap.PAGESIZE
            bar.flush(start, offset + len(data) - start)
            print("ok", flush=True)
        elif words[:1] == ["r"]:
            offset, length = int(words[1]), int(words[2])
            print(bar[offset : offset + length].hex(), flush=True)
        elif words[:1] == ["q"]:
            break
    bar.close()
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
