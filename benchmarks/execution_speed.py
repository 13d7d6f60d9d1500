"""How fast tiles run through the daemon (docs/executor-speed.md).

    .venv/bin/python benchmarks/execution_speed.py          # prints the rows
    .venv/bin/python benchmarks/execution_speed.py --smoke  # seconds

A real `ipufs mount` of one ipu2 (benchmarks/run.py's daemon(), on every
CPU) runs a counted loop of two words,

    loop: add $m2, $m2, 3
          brnzdec $m1, loop

(inside an outer brnzdec loop), and the same words run in a naive C
interpreter built in the same run (benchmarks/naive_interpreter.c: fetch,
pick the rule by the opcode bits, execute), the yardstick: alone, and in
as many processes at once as there are CPUs, which says what this
machine's CPUs give at once (a shared virtual machine may give less than
one each). Every tile started runs `sync 3` first, so that they set off
together once the last is started, then its loop, `sync 3` again, and
`sync 4`, which reaches the host as signal 46: the time from the start
to that signal, over the instructions the tiles retired in it, is the
rate (wall time throughout). Rows: one tile alone; every tile of the IPU
(1472) at once, against one tile; one tile while the 1471 others wait at
`sync 3`, against alone; one tile while another thread of the host reads
CTXT_STS of every tile, one after another, back to back, against alone.
Each round runs everything in ORDER, and each ratio is the median over
the rounds of each round's ratio between two runs side by side (PAIRS):
every tile, the sync and the polled tile against a run of one tile alone
beside it, one tile against the naive interpreter right after it.
Each measurement runs in a process of its own that blocks the signals
before anything starts a thread.
benchmarks/run.py adds these rows to docs/performance.md.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

BASE = 0x4C000  # an ipu2 tile's first code address
LOOP = """
.text {base:#x}
.supervisor
_start:
  sync 3
  setzi $m3, {outer}
again:
  setzi $m1, {inner}
loop:
  add $m2, $m2, 3
  brnzdec $m1, loop
  brnzdec $m3, again
  sync 3
  sync 4
done:
  bri done
"""
WAIT = """
.text {base:#x}
.supervisor
_start:
  sync 3
  sync 3
  sync 4
done:
  bri done
"""
LOOP_AT = 0xC  # where `loop` is, from BASE
TIMEOUT_S = 600
ROUNDS = 7  # the every-tile ratio swings with what the machine gives; seven rounds steady its median
#: the tiles a smoke run starts at most (it checks the benchmark works, not the figures)
SMOKE_TILES = 64
#: each round's measurements, in order: the rate of one tile alone swings
#: by up to 2x within seconds on a shared machine (docs/executor-speed.md),
#: so each row compares with a measurement made right before or after it;
#: starting every tile takes seconds, so "all" and "sync" come first and a
#: run of one tile alone follows each; the naive interpreter (one process,
#: then one per CPU) follows the first
ORDER = ("all", "alone", "naive", "together", "sync", "alone", "polled")
#: each ratio's two measurements, by position in ORDER
PAIRS = {"all": (0, 1), "alone": (1, 2), "together": (3, 2), "sync": (4, 5), "polled": (6, 5)}
#: the rate each row gives of a mode: its first run in a round
FIRST = {mode: ORDER.index(mode) for mode in ORDER}


def retired(outer: int, inner: int) -> int:
    """What LOOP retires on one tile, to its `sync 4` included."""
    return 1 + 1 + (outer + 1) * (1 + 2 * (inner + 1) + 1) + 2


def _measure(mnt: str, mode: str, loop: str, wait: str, outer: int, inner: int, most: int) -> dict[str, float]:
    """In a process of its own (main()): start ``mode``'s tiles (at most
    ``most``; 0: every one), wait for signal 46; the seconds from the start
    to it, and for "polled" the CTXT_STS reads the other thread made per
    second."""
    from ipufs.client.signals import SignalReceiver

    receiver = SignalReceiver()  # before any thread: the signals are read, never delivered
    from ipufs.abi.tile_code import TDI_DBG_IOWNER
    from ipufs.client import Device
    from ipufs.client.execution import context_status

    with Device(0, mnt) as dev:
        dev.attach()
        tiles = dev.read_register("TILE_COUNT")
        tiles = min(tiles, most or tiles)
        dev.reset()
        looping = range(tiles) if mode == "all" else range(1)
        dev.load_elf(Path(loop).read_bytes(), looping)
        if mode == "sync":
            dev.load_elf(Path(wait).read_bytes(), range(1, tiles))
        stop = threading.Event()
        polls = [0]

        def poll() -> None:
            while not stop.is_set():
                for tile in range(tiles):
                    context_status(dev, tile)
                    polls[0] += 1
                    if stop.is_set():
                        return

        poller = threading.Thread(target=poll) if mode == "polled" else None
        started = list(range(tiles) if mode in ("all", "sync") else range(1))
        for tile in started:  # named: the first sync 3 waits for every one
            dev.tdi_write_register(tile, TDI_DBG_IOWNER, 0)
        if started[1:]:
            dev.start(BASE, started[1:])  # each waits at its first sync 3 until the last is started
        start = time.perf_counter()
        dev.start(BASE, started[:1])
        if poller is not None:  # not before: the TDI's registers are one set for every thread
            poller.start()
        got = receiver.wait_for(1, TIMEOUT_S)
        seconds = time.perf_counter() - start
        stop.set()
        if poller is not None:
            poller.join()
        exc = " ".join(f"{n}={dev.read_register(n):#x}" for n in ("EXC_CAUSE", "EXC_TILE", "EXC_ADDRESS", "EXC_CONTEXT"))
        dev.reset()
        if not got or got[0].signo != 46:
            raise RuntimeError(f"{mode}: no signal 46 within {TIMEOUT_S} s: {got} {exc}")
        return {"seconds": seconds, "tiles": len(looping), "polls": polls[0] / seconds}


def naive(outer: int, inner: int, words: list[int], copies: int = 1) -> float:
    """Instructions per second of wall time of benchmarks/naive_interpreter.c
    running ``words`` (the loop's two) as many times as the tiles do, in
    ``copies`` processes at once (all of them)."""
    build = Path(__file__).parent / "build"
    build.mkdir(exist_ok=True)
    binary = build / "naive_interpreter"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary),
                    str(Path(__file__).parent / "naive_interpreter.c")], check=True)
    count = (outer + 1) * (inner + 1) - 1  # the same turns of the loop's two words
    start = time.perf_counter()
    procs = [subprocess.Popen([str(binary), hex(BASE + LOOP_AT), str(count), *map(hex, words)],
                              stdout=subprocess.PIPE, text=True) for _ in range(copies)]
    retired = sum(int(p.communicate(timeout=TIMEOUT_S)[0].split()[0]) for p in procs)
    return retired / (time.perf_counter() - start)


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    from run import daemon, spread  # benchmarks/run.py

    from ipufs.model.isa import Arch
    from ipufs.model.isa.assembler import Assembler

    rounds = 1 if smoke else ROUNDS
    outer, inner = (1, 20_000) if smoke else (99, 1_000_000)  # one tile: 200 M instructions
    many = (0, 2_000) if smoke else (0, 100_000)  # every tile: 294 M instructions in all
    sources = {"loop": LOOP.format(base=BASE, outer=outer, inner=inner),
               "many": LOOP.format(base=BASE, outer=many[0], inner=many[1]), "wait": WAIT.format(base=BASE)}
    code = bytes(Assembler(Arch.IPU2).assemble(sources["loop"]).sections[0].data)
    words = [int.from_bytes(code[at:at + 4], "little") for at in (LOOP_AT, LOOP_AT + 4)]  # add, brnzdec
    cpus = len(os.sched_getaffinity(0))
    rates: dict[str, list[float]] = {mode: [] for mode in ORDER}  # each round's first run of the mode
    ratios: dict[str, list[float]] = {mode: [] for mode in PAIRS}  # each round's ratio (PAIRS)
    polls: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, daemon(1, cpu=None) as (mnt, _pid, _):
        elves = {}
        for name, source in sources.items():
            path = Path(tmp) / f"{name}.s"
            path.write_text(source)
            elves[name] = str(Path(tmp) / f"{name}.elf")
            subprocess.run([sys.executable, "-I", "-m", "ipufs", "asm", str(path), "--arch", "ipu2", "-o",
                            elves[name]], check=True)

        def measure(mode: str) -> float:
            """One run of ``mode``: instructions per second of wall time."""
            if mode in ("naive", "together"):
                return naive(outer, inner, words, cpus if mode == "together" else 1)
            loop, counts = (elves["many"], many) if mode == "all" else (elves["loop"], (outer, inner))
            out = subprocess.run([sys.executable, __file__, "--measure", str(mnt), mode, loop, elves["wait"],
                                  *map(str, counts), str(SMOKE_TILES if smoke else 0)],
                                 capture_output=True, text=True, timeout=2 * TIMEOUT_S)
            if out.returncode != 0:
                raise RuntimeError(f"execution_speed {mode}: {out.stderr.strip()}")
            result = json.loads(out.stdout)
            if mode == "polled":
                polls.append(result["polls"])
            return float(result["tiles"] * retired(*counts) / result["seconds"])

        measure("alone")  # builds what the daemon makes once (the native loop, the fabric's tables: 0.13 s)
        for _ in range(rounds):  # each round everything once: the machine's pace drifts
            got = [measure(mode) for mode in ORDER]
            for mode, at in FIRST.items():
                rates[mode].append(got[at])
            for mode, (a, b) in PAIRS.items():
                ratios[mode].append(got[a] / got[b])

    m = {key: statistics.median(values) / 1e6 for key, values in rates.items()}
    per = f"median of {rounds} rounds, the ratio per round"
    beside = f"median of {rounds} rounds; the ratio per round, to the run of one tile alone beside it"
    pair = statistics.median(ratios["together"])

    return [
        ("Executor: the naive C interpreter of the counted loop's two words (benchmarks/naive_interpreter.c, "
         f"one process; then {cpus} at once, all of them; {per})", f"{m['naive']:.0f} M instr/s",
         f"{cpus} at once: {m['together']:.0f} M instr/s", spread(ratios["together"]),
         "the yardstick (wall time)"),
        (f"Executor through the daemon: one tile of an ipu2 running the counted loop, start to signal 46 (median "
         f"of {rounds} rounds; the ratio per round, to the naive interpreter's run beside it)",
         f"{m['alone']:.1f} M instr/s", f"naive interpreter: {m['naive']:.0f} M instr/s", spread(ratios["alone"]),
         "≥ 0.25×"),
        (f"Executor through the daemon: every tile of an ipu2 running the loop, {cpus} CPUs ({beside})",
         f"{m['all']:.1f} M instr/s", f"one tile: {m['alone']:.1f} M instr/s", spread(ratios["all"]),
         f"≥ 1.6× on 2 CPUs (the naive one, {cpus} at once: {pair:.2f}×)"),
        (f"Executor through the daemon: one tile running the loop while the other 1471 wait at `sync 3` ({beside})",
         f"{m['sync']:.1f} M instr/s", f"alone: {m['alone']:.1f} M instr/s", spread(ratios["sync"]), "as alone"),
        ("Executor through the daemon: one tile running the loop while a host thread reads CTXT_STS of every "
         f"tile back to back ({statistics.median(polls):,.0f} reads/s; {beside})",
         f"{m['polled']:.1f} M instr/s", f"alone: {m['alone']:.1f} M instr/s", spread(ratios["polled"]),
         "not starved"),
    ]


def main() -> int:
    if sys.argv[1:2] == ["--measure"]:
        mnt, mode, loop, wait, outer, inner, most = sys.argv[2:9]
        print(json.dumps(_measure(mnt, mode, loop, wait, int(outer), int(inner), int(most))))
        return 0
    from rows_main import print_rows  # beside this script

    return print_rows(__doc__, rows)


if __name__ == "__main__":
    sys.exit(main())
