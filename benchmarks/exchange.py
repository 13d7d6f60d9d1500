"""What the exchange costs the executor (docs/performance.md, issue 38's goal).

    .venv/bin/python benchmarks/exchange.py          # prints the rows
    .venv/bin/python benchmarks/exchange.py --smoke  # seconds

Every tile of an ipu21 (1472) runs phases of a permutation: tile s sends
WORDS words to tile (5s + 17) mod 1472 and receives as many from another,
in the same phase (the C600 runtime's all-tile permutation test, planned
by the exchange tests' planner: tests/model/executor/exchange_kit.py).
The same programs with every exchange instruction replaced by a `delay`
of as many events (the same instructions, turns and syncs, no exchange)
are the control: the row gives both rates and their ratio (the median of
seven rounds, each measuring both, and the rounds' range), the goal being
an exchange phase that costs no more than twice the same instructions
without it. In process, no mount; CPU time of the measuring thread (the
exchange runs there; a pass spreads the rest over the lanes in both).
benchmarks/run.py adds the row to docs/performance.md.
"""
from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TILES = 1472
ROUNDS = 7  # each round measures 0.1-0.2 s of CPU, which swings with the machine
SOURCE, DESTINATION = 0x60000, 0x70000
PROGRAM = """\
\tsetzi $m8, 0
\tput $INCOMING_BASE, $m8
\tput $OUTGOING_BASE, $m15
\tsetzi $m5, {phases}
loop:
\tsync 3
\tcall $m10, row
\tbrnzdec $m5, loop
\tbr $m15
\t.align 8
row:
{row}"""


def _rows(words: int) -> dict[int, str]:
    """Each tile's row for one phase of the permutation."""
    from tests.model.executor.exchange_kit import Schedule, earliest, transfer

    target = {s: (5 * s + 17) % TILES for s in range(TILES)}
    latest = max(earliest(s, [r]) for s, r in target.items())  # every sender starts there
    first = dict.fromkeys(range(TILES), latest)
    while True:  # no tile's receive control may fall on its own send's first event
        rows: dict[int, Schedule] = {}
        for s, r in target.items():
            transfer(rows, s, [r], words, SOURCE, DESTINATION, first[s])
        clash = [t for t, row in rows.items() if any(e == row.sends[0][0] for e, *_ in row.controls)]
        if not clash:
            return {t: row.row() for t, row in rows.items()}
        for t in clash:
            first[t] += 1


def _without_exchange(row: str) -> str:
    """The row with each exchange instruction a delay of as many events."""
    return re.sub(r"\t(?:send|sendoff|sendpic|delaypic|delayxpic) (\d+)[^\n]*", r"\tdelay \1", row)


def _measure(rows: dict[int, str], phases: int) -> tuple[int, float]:
    """Instructions retired and the thread's CPU seconds to run ``phases``
    phases of ``rows`` on every tile."""
    import numpy as np

    from ipufs.daemon.execution import slice_turns
    from tests.model.executor.exchange_kit import CODE, assemble, ipu21, load, start

    ipu: Any = ipu21()
    for tile in range(TILES):
        load(ipu, tile, CODE, assemble(PROGRAM.format(phases=phases - 1, row=rows[tile])))
        load(ipu, tile, SOURCE, np.arange(tile, tile + 256, dtype=np.uint32).tobytes())
    start(ipu, list(range(TILES)))
    cpu = time.thread_time()
    while ipu.execution.busy():
        ipu.execution.run(slice_turns(ipu.execution))
    return ipu.execution.instructions, time.thread_time() - cpu


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    words, phases, rounds = (16, 1, 1) if smoke else (64, 8, ROUNDS)
    exchange = _rows(words)
    control = {t: _without_exchange(r) for t, r in exchange.items()}
    times: list[float] = []
    controls: list[float] = []
    for _ in range(rounds):  # alternating, so that both see the machine as it is
        n, cpu = _measure(exchange, phases)
        m, base = _measure(control, phases)
        assert n == m, "the control runs the same instructions"
        times.append(cpu)
        controls.append(base)
    cpu, base = statistics.median(times), statistics.median(controls)
    ratios = sorted(t / b for t, b in zip(times, controls))
    spread = f" ({ratios[0]:.1f}–{ratios[-1]:.1f})" if rounds > 1 else ""
    return [(f"Executor: exchange phases on all 1472 tiles of an ipu21, each tile sending {words} words and "
             f"receiving {words} ({phases} phases, {n:,} instructions; in process, the caller's thread's CPU time, "
             f"median of {rounds} rounds)",
             f"{n / cpu / 1e6:.2f} M instr/s ({cpu:.2f} s)",
             f"the same instructions, no exchange: {m / base / 1e6:.2f} M instr/s ({base:.2f} s)",
             f"{statistics.median(ratios):.1f}× the time{spread}", "≤ 2× the time")]


if __name__ == "__main__":
    from rows_main import print_rows  # beside this script

    sys.exit(print_rows(__doc__, rows))
