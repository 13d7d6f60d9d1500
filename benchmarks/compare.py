"""Compare two checkouts of ipufs on the hot paths, in alternating rounds.

    git worktree add ../ipufs-old REV && (cd ../ipufs-old && ./dev setup)
    sudo .venv/bin/python benchmarks/compare.py ../ipufs-old .

For each checkout in turn (ROUNDS times), a real `ipufs mount` of that
checkout (4 x ipu2, on the servers' CPU) answers benchmarks/bench_client.c:
the ioctl round trip (SET_IPU_ID) and the device event -> signal latency
(the `interrupt` fault with `stamp`, 500 µs apart). Alternating lets both
see the same moods of the machine; the medians over the rounds are what
to compare. Each checkout needs its own .venv (`./dev setup`).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (the benchmark's own helpers: pinning, the client)

INJECT = """
import sys, time
from ipufs.client import Control
with Control.of_mount(sys.argv[1]) as control:
    for _ in range(int(sys.argv[2])):
        control.inject("interrupt", 2, source="gs1_e0", stamp=True)
        time.sleep(float(sys.argv[3]))
"""


def measure(tree: Path, client: Path, n: int) -> tuple[float, float]:
    """p50 of the ioctl round trip and of the event latency, in µs."""
    with run.daemon(4, checkout=tree) as (mnt, _, _):
        rtt = run.run_client(client, "ioctl", mnt, 0, n * 5)
        listener = subprocess.Popen([str(client), "event-latency", str(mnt), "2", str(n)],
                                    stdout=subprocess.PIPE, text=True, preexec_fn=run.on_client_cpu)
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", INJECT, str(mnt), str(n),
                        str(run.EVENT_GAP)], check=True, cwd=tree)
        out, _ = listener.communicate(timeout=120)
        events = [float(x) for x in out.split()]
        return run.p50(rtt) / 1000, run.p50(events) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs=2, type=lambda p: Path(p).resolve(), help="the two checkouts: before, after")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("-n", type=int, default=3000, help="events per round (ioctls: five times as many)")
    args = parser.parse_args()
    client = run.build()
    results: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            results[tree].append(measure(tree, client, args.n))
            print(f"{tree}: ioctl {results[tree][-1][0]:.1f} µs, event {results[tree][-1][1]:.1f} µs", flush=True)
    for tree, rows in results.items():
        print(f"{tree}: medians over {args.rounds} rounds: ioctl round trip "
              f"{statistics.median(r[0] for r in rows):.1f} µs, event → signal {statistics.median(r[1] for r in rows):.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
