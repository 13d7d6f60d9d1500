"""Instructions per second of the tile executor (docs/execution.md).

    .venv/bin/python benchmarks/execution.py          # prints the rows
    .venv/bin/python benchmarks/execution.py --smoke  # seconds

Rows: one tile of an ipu1 running an integer loop (add, xor, shl, ld32,
st32, brnzdec) on its supervisor; every tile of an ipu1 (1216) running
the same loop, in the slices the daemon runs (Execution.run with the
daemon's slice size); the same loop as six workers of one tile. The model
runs in process, no mount: this is the interpreter's own rate, the
ceiling of what a mount can do. benchmarks/run.py adds these rows to
docs/performance.md.
"""
from __future__ import annotations

import mmap
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOOP = """
.text 0x40000
.supervisor
_start:
  setzi $m1, {count}
  setzi $m2, 0x60000
loop:
  add $m3, $m3, $m1
  xor $m4, $m3, $m1
  shl $m5, $m4, 3
  ld32 $m6, $m2, $m15, 0
  st32 $m5, $m2, $m15, 1
  brnzdec $m1, loop
  trap 0
"""

WORKERS = """
.text 0x40000
.supervisor
_start:
  setzi $m0, worker
  setzi $m1, 0x61000
  runall $m0, $m1, 4
  sync 2
  trap 0
.align 8
.worker
worker:
  setzi $m1, {count}
loop:
  add $m3, $m3, $m1
  xor $m4, $m3, $m1
  shl $m5, $m4, 3
  ld32 $m6, $m13, $m15, 0
  st32 $m5, $m13, $m15, 1
  brnzdec $m1, loop
  exitz $m15
"""


def _ipu(profile: str = "ipu1") -> Any:
    from ipufs.model.ipu import Ipu
    from ipufs.model.memory import BarMemory
    from ipufs.model.profile import PROFILES, Region

    p = PROFILES[profile]

    def sparse(size: int) -> BarMemory:
        m = mmap.mmap(-1, size)
        return BarMemory(memoryview(m), discard=lambda: m.madvise(mmap.MADV_REMOVE))

    return Ipu(p, 0, {r: sparse(p.region_size(r)) for r in Region})


def _measure(source: str, tiles: range) -> tuple[int, float]:
    from ipufs.abi import tile_code
    from ipufs.daemon.execution import slice_turns
    from ipufs.model.executor import debug as tdi_side
    from ipufs.model.isa import Arch
    from ipufs.model.isa.assembler import Assembler
    from ipufs.model.tdi import TileDebug

    ipu = _ipu()
    program = Assembler(Arch.IPU1).assemble(source)
    for tile in tiles:
        for section in program.sections:
            for at in range(0, len(section.data), 4):
                ipu.tiles.write(tile, (section.address or 0) + at, bytes(section.data[at:at + 4]))
        debug = ipu.tdi.setdefault(tile, TileDebug())
        tdi_side.write_register(ipu.execution, tile, debug, tile_code.TDI_DBG_IEXEC,
                                tile_code.branch_word(program.entry))
    start = time.perf_counter()
    while ipu.execution.busy():
        ipu.execution.run(slice_turns(ipu.execution))
    return ipu.execution.instructions, time.perf_counter() - start


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    out = []
    count = 2_000 if smoke else 100_000
    n, s = _measure(LOOP.format(count=count), range(1))
    out.append(("Executor: one tile, integer loop on the supervisor (in process)",
                f"{n / s / 1e6:.2f} M instr/s", "—", "—", "20 M instr/s per core (not met: Python loop)"))
    n, s = _measure(WORKERS.format(count=count // 6), range(1))
    out.append(("Executor: one tile, the loop on six workers (in process)", f"{n / s / 1e6:.2f} M instr/s",
                "—", "—", "—"))
    n, s = _measure(LOOP.format(count=20 if smoke else 200), range(1216))
    out.append(("Executor: all 1216 tiles of an ipu1, integer loop, daemon-sized slices (in process)",
                f"{n / s / 1e6:.2f} M instr/s ({s:.1f} s)", "—", "—", "—"))
    return out


if __name__ == "__main__":
    from rows_main import print_rows  # beside this script

    sys.exit(print_rows(__doc__, rows))
