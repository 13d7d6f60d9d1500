"""The command line of a benchmark that measures a few rows of
docs/performance.md on its own (benchmarks/run.py takes the same rows
into its full table): `--smoke` for a seconds-long run, each row printed
as a Markdown table row."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def print_rows(doc: str | None, rows: Callable[[bool], Sequence[Sequence[str]]]) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a seconds-long run")
    args = parser.parse_args()
    for row in rows(args.smoke):
        print("| " + " | ".join(row) + " |")
    return 0
