"""The native fast path against the Python path and the C server.

    sudo .venv/bin/python benchmarks/fast_path.py          # prints the rows
    sudo .venv/bin/python benchmarks/fast_path.py --smoke  # seconds

Three servers mounted side by side: `ipufs mount` (4 × ipu2, default
settings: the fast path on), `ipufs mount --no-fast-path`, and the C
libfuse3 server (benchmarks/fuse_baseline.c). Rounds alternate between
them; in each, C clients (benchmarks/bench_client.c `ioctl-rate`, pinned
as benchmarks/run.py pins them) issue MAILBOX_READ_ONLY's count form as
fast as they can for a second, 1 and 8 at a time. One client's rate is
one over its round trip. benchmarks/run.py adds these rows to
docs/performance.md.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from run import baseline_server, build, build_baseline, daemon, rate, spread  # noqa: E402  # benchmarks/run.py

ROUNDS = 5
CLIENTS = (1, 8)


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    binary = build()
    baseline = build_baseline()
    seconds = 0.3 if smoke else 1.0
    rounds = 2 if smoke else ROUNDS
    out: list[tuple[str, str, str, str, str]] = []
    with daemon(4) as (fast_mnt, _, _), daemon(4, extra=("--no-fast-path",)) as (slow_mnt, _, _), \
            baseline_server([str(baseline)] if baseline else None) as c_mnt:
        rates: dict[str, dict[int, list[float]]] = {name: {n: [] for n in CLIENTS} for name in ("fast", "slow", "c")}
        for _ in range(rounds):
            for clients in CLIENTS:
                rates["fast"][clients].append(rate(binary, fast_mnt, clients, seconds))
                rates["slow"][clients].append(rate(binary, slow_mnt, clients, seconds))
                if c_mnt is not None:
                    rates["c"][clients].append(rate(binary, c_mnt, clients, seconds))
    for clients in CLIENTS:
        fast, slow, c = (rates[name][clients] for name in ("fast", "slow", "c"))
        label = f"fast path: sustained MAILBOX_READ_ONLY (count) ioctls/s, {clients} client{'s' * (clients > 1)}"
        out.append((f"{label}, against --no-fast-path", f"{statistics.median(fast):,.0f}",
                    f"--no-fast-path: {statistics.median(slow):,.0f}",
                    spread([a / b for a, b in zip(fast, slow, strict=True)]), "—"))
        if c:
            out.append((f"{label}, against the C server", f"{statistics.median(fast):,.0f}",
                        f"C libfuse3 server: {statistics.median(c):,.0f}",
                        spread([a / b for a, b in zip(fast, c, strict=True)]),
                        "≥ 1.0× at 8 clients" if clients == 8 else "report the ratio"))
        if clients == 1:
            trip = [1e6 / r for r in fast]
            others = [("--no-fast-path", slow)] + ([("C libfuse3 server", c)] if c else [])
            for name, against in others:
                out.append(("fast path: MAILBOX_READ_ONLY (count) round trip, one client, mean "
                            f"(one over its rate), against {name}", f"{statistics.median(trip):.1f} µs",
                            f"{name}: {statistics.median([1e6 / r for r in against]):.1f} µs",
                            spread([theirs / ours for ours, theirs in zip(fast, against, strict=True)]),
                            "≤ 1.0× the C server's" if name.startswith("C") else "—"))
    return out


if __name__ == "__main__":
    from rows_main import print_rows  # benchmarks/rows_main.py

    sys.exit(print_rows(__doc__, rows))
