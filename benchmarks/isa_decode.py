"""Decode and disassembly rates of the tile instruction set (docs/isa.md).

    .venv/bin/python benchmarks/isa_decode.py          # prints the rows
    .venv/bin/python benchmarks/isa_decode.py --smoke  # seconds

Rows: the word decoder (Decoder.decode, one word at a time), the array
decoder (Decoder.classify, numpy), and `ipufs disasm --raw` of the tile
windows of an ipu1 (1216 tiles × 256 KiB = 304 MiB): zeros, as after a reset,
and one holding the same 4 KiB of random words in every tile (a loaded
program repeats per tile); output to /dev/null. benchmarks/run.py adds
these rows to docs/performance.md.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 1216 * 256 * 1024  # the ipu1 tiles' windows (from 0x0c000000 of its exchange BAR)


def _rate(words: int, seconds: float) -> str:
    return f"{words / seconds / 1e6:,.2f} M words/s"


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    import numpy as np

    from ipufs.model.isa import Decoder

    decoder = Decoder()
    rng = random.Random(1)
    n = 20_000 if smoke else 1_000_000
    words = [rng.getrandbits(32) for _ in range(n)]
    start = time.perf_counter()
    for w in words:
        decoder.decode(w)
    word_rate = _rate(n, time.perf_counter() - start)
    out = [("ISA: word decoder (Decoder.decode), random words", word_rate, "—", "—", "—")]

    array = np.random.default_rng(1).integers(0, 1 << 32, size=n * (1 if smoke else 16), dtype=np.uint32)
    start = time.perf_counter()
    decoder.classify(array)
    out.append(("ISA: array decoder (Decoder.classify, numpy), random words",
                _rate(array.size, time.perf_counter() - start), "—", "—", "—"))

    size = 4 << 20 if smoke else WINDOW
    tile = 256 * 1024
    block = bytes(rng.getrandbits(8) for _ in range(4096))
    with tempfile.TemporaryDirectory() as tmp:
        for label, fill in (("zeros", None), ("4 KiB of random words per tile", block)):
            path = Path(tmp) / "window.bin"
            with path.open("wb") as f:
                for _ in range(size // tile):
                    f.write(fill + bytes(tile - len(fill)) if fill else bytes(tile))
            start = time.perf_counter()
            with open(os.devnull, "w") as sink:
                subprocess.run([sys.executable, "-I", "-m", "ipufs", "disasm", "--raw", str(path)],
                               stdout=sink, stderr=subprocess.DEVNULL, check=False)
            seconds = time.perf_counter() - start
            what = "the ipu1 exchange window (304 MiB)" if not smoke else f"{size >> 20} MiB"
            out.append((f"ISA: `ipufs disasm --raw` of {what}, {label}",
                        f"{seconds:.1f} s ({_rate(size // 4, seconds)})", "—", "—", "304 MiB in < 60 s"))
    return out


if __name__ == "__main__":
    from rows_main import print_rows  # beside this script

    sys.exit(print_rows(__doc__, rows))
