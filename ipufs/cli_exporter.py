# The monitoring commands of `ipufs`: `exporter`, which serves Prometheus
# metrics of the IPUs in --dev, and `gcipuinfo-path`, the directory that
# makes `import gcipuinfo` find ipufs's module (docs/monitoring.md).
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ipufs.monitoring.paths import module_dir


def cmd_gcipuinfo_path(args: argparse.Namespace) -> int:
    print(module_dir())
    return 0


def add_commands(sub: Any, tool: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add `exporter` and `gcipuinfo-path` to the `ipufs` parser."""
    mp = sub.add_parser("gcipuinfo-path", help="print the directory to put on PYTHONPATH for `import gcipuinfo`",
                        description="Print the directory holding ipufs's gcipuinfo module: "
                                    "export PYTHONPATH=$(ipufs gcipuinfo-path) (docs/monitoring.md).")
    mp.set_defaults(func=cmd_gcipuinfo_path)
