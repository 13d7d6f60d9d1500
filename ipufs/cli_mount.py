# The daemon's own command of `ipufs`: `mount`, which runs a daemon in the
# foreground (settings from --config, then the options; systemd told of
# readiness through ipufs/sd_notify.py), and what turns its failures at start into one
# line (docs/systemd.md, docs/tools.md).
from __future__ import annotations

import argparse
import logging
import os
import signal
from typing import Any

import trio

from ipufs.daemon import settings
from ipufs.daemon.settings import given
from ipufs.sd_notify import sd_notify
from ipufs.problems import USAGE, Problem, as_root

log = logging.getLogger("ipufs")


def cmd_mount(args: argparse.Namespace) -> int:
    from ipufs.daemon.daemon import Daemon, Serving
    from ipufs.fuse import mount as fmount
    from ipufs.daemon import config as cfg
    from ipufs.daemon import descriptors
    from ipufs.fuse import transports

    settings: dict[str, Any] = {}
    try:
        if args.config or os.path.exists(cfg.DEFAULT_FILE) and args.config is None:
            settings.update(cfg.load(args.config or cfg.DEFAULT_FILE))
        settings.update(given(vars(args)))
        config = cfg.daemon_config(settings)
        config.validate()
    except ValueError as exc:  # a bad setting: a usage error
        raise Problem(str(exc), status=USAGE) from None
    except FileNotFoundError as exc:
        raise Problem(f"{exc.filename} does not exist", "name a configuration file that does (docs/systemd.md)",
                      status=USAGE) from None
    try:
        transports.choose(config.transports)  # the daemon chooses again; this says why not, in one line, before starting
    except ValueError as exc:
        raise Problem(str(exc)) from None
    mountpoint = config.mountpoint
    if any(m.mountpoint == mountpoint for m in fmount.mounts()) and not fmount.is_dead(mountpoint):
        raise Problem(f"{mountpoint} is already mounted by a running ipufs daemon",
                      f"use it as it is, unmount it first (`ipufs umount {mountpoint}`), or name another mount point")

    exporter = None
    if config.exporter:  # bound now, so that a busy address fails before mounting
        from pathlib import Path

        from ipufs.cli_exporter import open_exporter

        exporter = open_exporter(Path(mountpoint), config.exporter, pod_resources=None)  # pods: `ipufs exporter`
    # the usual soft limit is too low for 128 IPUs; the exporter's connections count too
    descriptors.ensure(config.ipus, exporter.limits.descriptors if exporter is not None else 0)

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
                log.info("%d x %s mounted at %s (%s%s)%s; requests through %s", config.ipus, config.profile,
                         config.mountpoint, serving.mode, f": {serving.mode_reason}" if serving.mode_reason else "",
                         f", linked in {serving.linked_in}" if serving.linked_in else "", serving.transport)
                if daemon.created:  # said once mounted: a refused mount removed them again, silently
                    above = len(daemon.created) - 1
                    log.info("created %s%s, which did not exist; removed at unmount", config.mountpoint,
                             f" (and {above} missing directories above it)" if above else "")
                if exporter is not None:
                    exporter.start()
                    log.info("metrics of the IPUs on http://%s:%d/metrics", *exporter.address)
                sd_notify(f"READY=1\nSTATUS={config.ipus} IPUs at {config.mountpoint} ({serving.mode})")

    try:
        trio.run(main)
    except (PermissionError, BaseExceptionGroup) as exc:
        if _has(exc, PermissionError):
            raise Problem("mounting needs root (with CAP_SYS_ADMIN) to mount FUSE and register passthrough files",
                          as_root(f"ipufs mount {mountpoint}")) from exc
        if isinstance(exc, BaseExceptionGroup):
            raise _alone(exc) from None
        raise
    finally:
        if exporter is not None:
            exporter.close()
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
    m.add_argument("--config", help="a TOML file of settings (docs/systemd.md)")
    settings.add_options(m)
    m.set_defaults(func=cmd_mount)
