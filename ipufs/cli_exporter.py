# The monitoring commands of `ipufs`: `exporter`, which serves Prometheus
# metrics of the IPUs in --dev, and `gcipuinfo-path`, the directory that
# makes `import gcipuinfo` find ipufs's module (docs/monitoring.md).
from __future__ import annotations

import argparse
import threading
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ipufs.monitoring.paths import module_dir
from ipufs.problems import USAGE, Problem

if TYPE_CHECKING:
    from ipufs.monitoring.exporter import Exporter

EXTRA = "pip install 'ipufs[prometheus]'"


def open_exporter(root: Path, listen: str) -> Exporter:
    """An exporter of the IPUs in ``root`` bound to ``listen`` (not yet
    serving); a Problem, in one line, when it cannot be."""
    try:
        from ipufs.monitoring.exporter import Exporter, parse_listen
    except ImportError as exc:
        raise Problem(f"the exporter needs prometheus_client ({exc})", EXTRA) from None
    try:
        parse_listen(listen)
    except ValueError as exc:
        raise Problem(str(exc), status=USAGE) from None
    try:
        return Exporter(root, listen)
    except OSError as exc:
        raise Problem(f"cannot listen on {listen}: {exc.strerror or exc}",
                      "name a free address with --listen") from None


def cmd_exporter(args: argparse.Namespace) -> int:
    """Serve /metrics until SIGTERM or Ctrl-C (docs/monitoring.md)."""
    import signal

    from ipufs.sd_notify import sd_notify
    from ipufs.tools import devices

    root = devices.root(args.dev)
    exporter = open_exporter(root, args.listen)
    host, port = exporter.address
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    exporter.start()
    print(f"ipufs exporter: serving the IPUs in {root} on http://{host}:{port}/metrics", flush=True)
    sd_notify(f"READY=1\nSTATUS=serving on {host}:{port}")
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sd_notify("STOPPING=1")
        exporter.close()
    return 0


def cmd_gcipuinfo_path(args: argparse.Namespace) -> int:
    print(module_dir())
    return 0


def add_commands(sub: Any, tool: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add `exporter` and `gcipuinfo-path` to the `ipufs` parser."""
    ex = tool("exporter", "serve Prometheus metrics of the IPUs at /metrics (docs/monitoring.md)")
    ex.add_argument("--listen", default="127.0.0.1:9842", metavar="HOST:PORT",
                    help="where to listen (default %(default)s; 0.0.0.0:9842 for every interface)")
    ex.set_defaults(func=cmd_exporter)
    mp = sub.add_parser("gcipuinfo-path", help="print the directory to put on PYTHONPATH for `import gcipuinfo`",
                        description="Print the directory holding ipufs's gcipuinfo module: "
                                    "export PYTHONPATH=$(ipufs gcipuinfo-path) (docs/monitoring.md).")
    mp.set_defaults(func=cmd_gcipuinfo_path)
