# The daemon's own command of `ipufs`: `mount`, which runs a daemon in the
# foreground (settings from --config, then the options; systemd told of
# readiness with sd_notify), and what turns its failures at start into one
# line (docs/systemd.md, docs/tools.md).
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
from typing import Any

import trio

from ipufs.tools.problems import USAGE, Problem

log = logging.getLogger("ipufs")


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) about our state, when it is listening."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(address)
            s.sendall(message.encode())
    except OSError as exc:  # a manager that went away must not stop the daemon
        log.debug("could not notify %s: %s", address, exc)


def cmd_mount(args: argparse.Namespace) -> int:
    from ipufs.daemon.daemon import Daemon, Serving
    from ipufs.fuse import mount as fmount
    from ipufs.daemon import config as cfg
    from ipufs.daemon import descriptors

    settings: dict[str, Any] = {}
    try:
        if args.config or os.path.exists(cfg.DEFAULT_FILE) and args.config is None:
            settings.update(cfg.load(args.config or cfg.DEFAULT_FILE))
        given = {k: v for k, v in vars(args).items() if k in cfg.KEYS and v is not None}
        settings.update(given)
        config = cfg.daemon_config(settings)
        config.validate()
    except ValueError as exc:  # a bad setting: a usage error
        raise Problem(str(exc), status=USAGE) from None
    except FileNotFoundError as exc:
        raise Problem(f"{exc.filename} does not exist", "name a configuration file that does (docs/systemd.md)",
                      status=USAGE) from None
    mountpoint = config.mountpoint
    if any(m.mountpoint == mountpoint for m in fmount.mounts()) and not fmount.is_dead(mountpoint):
        raise Problem(f"{mountpoint} is already mounted by a running ipufs daemon",
                      f"use it as it is, unmount it first (`ipufs umount {mountpoint}`), or name another mount point")

    descriptors.ensure(config.ipus)  # the usual soft limit is too low for 128 IPUs

    async def main() -> None:
        daemon = Daemon(config)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def serve(task_status: trio.TaskStatus[Serving]) -> None:
                    await daemon.run(task_status=task_status)
                    nursery.cancel_scope.cancel()  # unmounted from outside

                async def watch_signals() -> None:
                    async for signum in signals:
                        log.info("%s: unmounting %s", signal.Signals(signum).name, config.mountpoint)
                        sd_notify("STOPPING=1")
                        nursery.cancel_scope.cancel()

                nursery.start_soon(watch_signals)
                serving: Serving = await nursery.start(serve)
                log.info("%d x %s mounted at %s (%s%s)%s", config.ipus, config.profile, config.mountpoint,
                         serving.mode, f": {serving.mode_reason}" if serving.mode_reason else "",
                         f", linked in {serving.linked_in}" if serving.linked_in else "")
                sd_notify(f"READY=1\nSTATUS={config.ipus} IPUs at {config.mountpoint} ({serving.mode})")

    try:
        trio.run(main)
    except (PermissionError, BaseExceptionGroup) as exc:
        if _has(exc, PermissionError):
            raise Problem("mounting needs root (with CAP_SYS_ADMIN) to mount FUSE and register passthrough files",
                          f"run `sudo ipufs mount {mountpoint}`") from exc
        if isinstance(exc, BaseExceptionGroup):
            raise _alone(exc) from None
        raise
    return 0


def _has(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``exc``, or any exception of a group it is, is a ``kind``."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_has(e, kind) for e in exc.exceptions)
    return isinstance(exc, kind)


def _alone(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error a nursery wrapped (a refusal at start, shown in one
    line by main()); the group itself when it holds several."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop()
        if isinstance(error, BaseExceptionGroup):
            pending += error.exceptions
        else:
            leaves.append(error)
    return leaves[0] if len(leaves) == 1 else group


def add_commands(sub: Any) -> None:
    """Add `mount` to the subcommands ``sub``."""
    m = sub.add_parser("mount", help="publish emulated IPUs (runs in the foreground)",
                       description="Mount emulated IPUs. Settings come from --config (default "
                                   "/etc/ipufs/ipufs.toml when it exists), then from these options.")
    m.add_argument("mountpoint", nargs="?", default=None, help="where to mount (default /run/ipufs)")
    m.add_argument("--config", help="a TOML file of settings (docs/systemd.md)")
    m.add_argument("--ipus", type=int, help="number of IPUs (default 4)")
    m.add_argument("--profile", help="device profile: ipu1, ipu2 or ipu21 (default ipu2)")
    m.add_argument("--owner", help="owner of the nodes (name or uid; default root)")
    m.add_argument("--group", help="group of the nodes (name or gid; default root)")
    m.add_argument("--mode", help="permission bits of the nodes (default 0660)")
    m.add_argument("--state-dir", dest="state_dir", help="keep BAR memory in files under this directory")
    m.add_argument("--group-size", dest="group_size", type=int, help="IPUs per GS2 group (default: per board)")
    m.add_argument("--control", help="control socket path (default MOUNTPOINT.ctl)")
    m.add_argument("--no-passthrough", dest="passthrough", action="store_const", const=False,
                   help="serve BARs through the page cache even where passthrough works")
    m.add_argument("--no-link-dev", dest="link_dev", action="store_const", const=False,
                   help="do not link /dev/ipuN* to the nodes (linking is the default as root)")
    m.add_argument("--dev-dir", dest="dev_dir", help="where to make the links (default /dev)")
    m.add_argument("--fault-plan", dest="fault_plan", help="a TOML fault plan to run (docs/faults.md)")
    m.add_argument("--trace-file", dest="trace_file", help="write the trace to this file (JSON lines)")
    m.add_argument("--trace-max-bytes", dest="trace_max_bytes", type=int,
                   help="rotate the trace file past this size (default 64 MiB)")
    m.add_argument("--spin-us", dest="spin_us", type=int,
                   help="after answering a request, keep looking for the next one (and for stores to "
                        "mapped registers) this many µs before sleeping (default 50; 0 saves CPU, costs "
                        "latency: docs/performance.md)")
    m.add_argument("--no-cdi", dest="cdi", action="store_const", const=False,
                   help="write no CDI spec (writing one into /var/run/cdi is the default as root)")
    m.add_argument("--cdi-dir", dest="cdi_dir", help="where to write the CDI spec (default /var/run/cdi)")
    m.add_argument("--cdi-prefix", dest="cdi_prefix",
                   help="before the CDI device names (default: none for /run/ipufs, else the mount "
                        "point's last component: graphcore.ai/ipu=PREFIX-0; docs/docker.md)")
    m.add_argument("--cdi-follow-restarts", dest="cdi_follow_restarts", action="store_const", const=True,
                   help="CDI devices that a restarted daemon reaches in running containers (a hook "
                        "links /dev/ipuN* into a bound directory; docs/docker.md)")
    m.set_defaults(func=cmd_mount)
