"""Instructions per second of the tile executor (docs/executor-speed.md).

    .venv/bin/python benchmarks/execution.py          # prints the rows
    .venv/bin/python benchmarks/execution.py --smoke  # seconds

Rows: one tile of an ipu1 running an integer loop (add, xor, shl, ld32,
st32, brnzdec) on its supervisor, with the native loop and on the Python
path alone (IPUFS_NATIVE_EXECUTOR=0); the same loop as six workers of one
tile; a kernel on one tile (the supervisor `runall`s six workers, each
running `rpt` loops of bundles with f32 multiply and add, reading
$FP_STS at the end), native and on the Python path alone; every tile of
an ipu1 (1216) running the integer loop, on every CPU and on one; and a
bulk-synchronous program on every tile of an ipu2 (1472): supersteps of
compute, then `sync 3`, repeated. Always in the slices the daemon runs
(its first slice, then as many turns as it would give: at least 1024 per
running tile, about 2 ms at the last slice's pace). The model runs in
process, no mount: the executor's own rate, the ceiling of what a mount
can do. The one-tile rates are per core: instructions over the measuring
thread's CPU time (on a shared machine wall time counts other processes'
turns too); the rows of every tile give wall time, since the passes
spread them over threads. benchmarks/run.py adds these rows to
docs/performance.md.
"""
from __future__ import annotations

import mmap
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOOP = """
.text @BASE@
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
.text @BASE@
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

KERNEL = """
.text @BASE@
.supervisor
_start:
  setzi $m0, worker
  setzi $m1, 0x60000
  runall $m0, $m1, 0
  sync 2
  trap 0
.worker
.align 8
worker:
  ld32 $a0, $m13, $m15, 0
  ld32 $a1, $m13, $m15, 1
  setzi $m1, {outer}
  setzi $m6, 0
outer:
  add $m6, $m6, 1
  rpt {inner}, 1
  {{ add $m2, $m2, 1 ; f32mul $a2, $a1, $a0 }}
  {{ ld32 $m4, $m13, $m15, 2 ; f32add $a3, $a3, $a1 }}
  brnzdec $m1, outer
  uget $a5, 0
  exitz $m15
.data 0x60000
  .word 0x3F801000, 0x3F800000, 7
"""

BSP = """
.text @BASE@
.supervisor
_start:
  setzi $m1, {steps}
  setzi $m2, 0x60000
step:
  setzi $m3, {work}
compute:
  ld32 $m4, $m2, $m15, 0
  add $m4, $m4, $m3
  st32 $m4, $m2, $m15, 0
  brnzdec $m3, compute
  sync 3
  brnzdec $m1, step
  trap 0
"""


def _ipu(profile: str = "ipu1") -> Any:
    from ipufs.model.ipu import Ipu
    from ipufs.model.memory import BarMemory
    from ipufs.model.profile import PROFILES, Region

    p = PROFILES[profile]

    def sparse(size: int) -> BarMemory:
        m = mmap.mmap(-1, size)
        return BarMemory(memoryview(m), discard=lambda at, n: m.madvise(mmap.MADV_REMOVE, at, n))

    return Ipu(p, 0, {r: sparse(p.region_size(r)) for r in Region})


def start_tiles(ipu: Any, tiles: Iterable[int], entry: int) -> None:
    """Start ``tiles``' supervisors at ``entry`` as a host does, through the
    IPU's debug unit (ipufs.abi.tile_code.start_writes)."""
    from ipufs.abi import tile_code

    before, after = tile_code.start_writes(entry)
    for tile in tiles:
        for reg, value in before:
            ipu.debug.write(tile, reg, value)
    ipu.execution.run(0)  # the branches retire
    for tile in tiles:
        for reg, value in after:
            ipu.debug.write(tile, reg, value)


def _measure(source: str, tiles: range, profile: str = "ipu1", native: bool = True,
             spread: bool = True) -> tuple[int, float, float]:
    """Instructions retired, the thread's CPU seconds and the wall seconds
    from the start of ``tiles`` to the end of every context; ``spread``:
    passes may use every CPU."""
    from ipufs.daemon.execution import at_least, next_turns, slice_turns
    from ipufs.model.isa import Arch
    from ipufs.model.isa.assembler import Assembler

    ipu = _ipu(profile)
    ipu.execution.native = native
    program = Assembler(Arch.named(profile)).assemble(source.replace("@BASE@", hex(ipu.tiles.base)))
    for tile in tiles:
        for section in program.sections:
            for at in range(0, len(section.data), 4):
                ipu.tiles.write(tile, (section.address or 0) + at, bytes(section.data[at:at + 4]))
    start_tiles(ipu, tiles, program.entry)
    ex = ipu.execution
    if not spread:
        ex._the_loop().parallel_turns = 0
    turns = slice_turns(ex)
    cpu, wall = time.thread_time(), time.perf_counter()
    while ex.busy():  # as the daemon's executor task slices them (ipufs/daemon/execution.py)
        turns = at_least(ex, turns)
        start = time.perf_counter()
        turns = next_turns(turns, ex.run(turns, turns), time.perf_counter() - start)
    return ex.instructions, time.thread_time() - cpu, time.perf_counter() - wall


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    out = []
    count = 2_000 if smoke else 300_000
    n, cpu, _ = _measure(LOOP.format(count=count), range(1))
    python = _measure(LOOP.format(count=count // 20), range(1), native=False)
    out.append(("Executor: one tile, integer loop on the supervisor (in process, per core)",
                f"{n / cpu / 1e6:.1f} M instr/s", f"Python path alone: {python[0] / python[1] / 1e6:.2f} M instr/s",
                f"{n / cpu / (python[0] / python[1]):.0f}×", "20 M instr/s per core"))
    n, cpu, _ = _measure(WORKERS.format(count=count // 6), range(1))
    out.append(("Executor: one tile, the loop on six workers (in process, per core)",
                f"{n / cpu / 1e6:.1f} M instr/s", "—", "—", "—"))
    outer, inner = (2, 50) if smoke else (60, 4000)
    n, cpu, _ = _measure(KERNEL.format(outer=outer, inner=inner), range(1))
    python = _measure(KERNEL.format(outer=outer // 20 or 1, inner=inner), range(1), native=False)
    out.append(("Executor: one tile, runall of six workers running rpt loops of f32 bundles (in process, per core)",
                f"{n / cpu / 1e6:.1f} M instr/s", f"Python path alone: {python[0] / python[1] / 1e6:.2f} M instr/s",
                f"{n / cpu / (python[0] / python[1]):.0f}×", "—"))
    count = 200 if smoke else 20_000
    n, _, wall = _measure(LOOP.format(count=count), range(1216))
    one = _measure(LOOP.format(count=count), range(1216), spread=False)
    cpus = len(os.sched_getaffinity(0))
    out.append((f"Executor: all 1216 tiles of an ipu1, integer loop, daemon-sized slices, {cpus} CPUs (in process, "
                "wall)", f"{n / wall / 1e6:.1f} M instr/s ({n / 1e6:.0f} M instructions)",
                f"one thread: {one[0] / one[2] / 1e6:.1f} M instr/s", f"{n / wall / (one[0] / one[2]):.2f}×", "—"))
    steps, work = (2, 10) if smoke else (10, 250)
    n, cpu, wall = _measure(BSP.format(steps=steps, work=work), range(1472), "ipu2")
    out.append((f"Executor: BSP program on all 1472 tiles of an ipu2: {steps} supersteps of "
                f"{4 * work} instructions, then sync 3 (in process)",
                f"{wall:.2f} s wall ({n / wall / 1e6:.1f} M instr/s)", "—", "—", "—"))
    return out


if __name__ == "__main__":
    from rows_main import print_rows  # beside this script

    sys.exit(print_rows(__doc__, rows))
