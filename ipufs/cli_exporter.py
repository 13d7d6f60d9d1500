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
    from ipufs.monitoring.exporter import Exporter, Limits

EXTRA = "pip install 'ipufs[prometheus]'"


def open_exporter(root: Path, listen: str, *, limits: Limits | None = None, web_config: str | None = None,
                  pod_resources: str | None = "", resource_name: str | None = None) -> Exporter:
    """An exporter of the IPUs in ``root`` bound to ``listen`` (not yet
    serving); a Problem, in one line, when it cannot be. ``pod_resources``:
    the kubelet's socket ("": its default place; None: never ask)."""
    try:
        from ipufs.monitoring.exporter import Exporter, Limits, parse_listen
        from ipufs.monitoring.pods import DEFAULT_SOCKET, PodResources
        from ipufs.monitoring.webconfig import WebConfigError
    except ImportError as exc:
        raise Problem(f"the exporter needs prometheus_client ({exc})", EXTRA) from None
    try:
        parse_listen(listen)
    except ValueError as exc:
        raise Problem(str(exc), status=USAGE) from None
    pods = None
    if pod_resources is not None:
        pods = PodResources(Path(pod_resources or DEFAULT_SOCKET))
        if resource_name:
            pods.resource_name = resource_name
    try:
        return Exporter(root, listen, limits=limits or Limits(), pods=pods,
                        web_config=Path(web_config) if web_config else None)
    except WebConfigError as exc:
        raise Problem(str(exc), "fix the web configuration file (docs/monitoring.md, \"TLS and basic "
                      "authentication\")", status=USAGE) from None
    except OSError as exc:
        raise Problem(f"cannot listen on {listen}: {exc.strerror or exc}",
                      "name a free address with --listen") from None


def cmd_exporter(args: argparse.Namespace) -> int:
    """Serve /metrics until SIGTERM or Ctrl-C (docs/monitoring.md)."""
    import signal

    from ipufs.sd_notify import sd_notify
    from ipufs.tools import devices

    from ipufs.monitoring.exporter import Limits

    root = devices.root(args.dev)
    limits = Limits(max_connections=args.max_connections, request_timeout=args.request_timeout,
                    cache=args.cache)
    exporter = open_exporter(root, args.listen, limits=limits, web_config=args.web_config_file,
                             pod_resources=None if args.pod_resources == "none" else args.pod_resources,
                             resource_name=args.resource_name)
    host, port = exporter.address
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    exporter.start()
    print(f"ipufs exporter: serving the IPUs in {root} on {exporter.scheme}://{host}:{port}/metrics", flush=True)
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


def _positive(kind: Callable[[str], Any], zero: bool = False) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"{text} is not {'zero or more' if zero else 'more than zero'}")
        return value
    return parse


def cmd_gcipuinfo_path(args: argparse.Namespace) -> int:
    print(module_dir())
    return 0


def add_commands(sub: Any, tool: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add `exporter` and `gcipuinfo-path` to the `ipufs` parser."""
    ex = tool("exporter", "serve Prometheus metrics of the IPUs at /metrics (docs/monitoring.md)")
    ex.add_argument("--listen", default="127.0.0.1:9842", metavar="HOST:PORT",
                    help="where to listen (default %(default)s; 0.0.0.0:9842 for every interface)")
    ex.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                    help="TLS and basic authentication, as Prometheus's exporter-toolkit reads them (YAML, or "
                         "TOML when it ends in .toml)")
    ex.add_argument("--max-connections", type=_positive(int), default=64, metavar="N",
                    help="HTTP connections open at once; more wait to be accepted (default %(default)s)")
    ex.add_argument("--request-timeout", type=_positive(float), default=10.0, metavar="SECONDS",
                    help="a request must arrive, and its answer be taken, within this (default %(default)s)")
    ex.add_argument("--cache", type=_positive(float, zero=True), default=1.0, metavar="SECONDS",
                    help="scrapes within this of a reading of the IPUs get that reading (default %(default)s)")
    ex.add_argument("--pod-resources", default="", metavar="SOCKET",
                    help="the kubelet's pod-resources socket, for pod labels (default "
                         "/var/lib/kubelet/pod-resources/kubelet.sock when it exists; `none`: never ask)")
    ex.add_argument("--resource-name", default=None, metavar="NAME",
                    help="the device plugin's resource name (default graphcore.ai/ipu)")
    ex.set_defaults(func=cmd_exporter)
    mp = sub.add_parser("gcipuinfo-path", help="print the directory to put on PYTHONPATH for `import gcipuinfo`",
                        description="Print the directory holding ipufs's gcipuinfo module: "
                                    "export PYTHONPATH=$(ipufs gcipuinfo-path) (docs/monitoring.md).")
    mp.set_defaults(func=cmd_gcipuinfo_path)
