# The `ipufs` command. Each subcommand is a small function over the library;
# errors reach the user as one line and an exit status, never a traceback.
"""ipufs: emulated Graphcore IPU device nodes over FUSE."""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from ipufs import __version__, cli_exec, cli_exporter, cli_faults, cli_isa, cli_mount
from ipufs.daemon import settings
from ipufs.sd_notify import sd_notify
from ipufs.daemon.log_budget import LogBudget
from ipufs.problems import USAGE, Problem
from ipufs.tools.deadline import DAEMON_TIMEOUT

log = logging.getLogger("ipufs")


def cmd_umount(args: argparse.Namespace) -> int:
    from ipufs.fuse import mount as fmount

    mountpoint = os.path.abspath(args.mountpoint)
    if not any(m.mountpoint == mountpoint for m in fmount.mounts()):
        if not os.path.lexists(mountpoint):
            raise Problem(f"{mountpoint} does not exist", "name an ipufs mount point (`ipufs doctor` lists them)")
        raise Problem(f"{mountpoint} is not an ipufs mount", _mount_list(fmount.mounts()))
    if args.abort:
        fmount.abort(mountpoint)
    elif fmount.stop(mountpoint):
        log.info("files were open at %s: its connection was ended, they now fail with ENOTCONN", mountpoint)
    return 0


def _mount_list(mounts: list[Any]) -> str:
    if not mounts:
        return "there are no ipufs mounts"
    return "ipufs mounts are " + ", ".join(m.mountpoint for m in mounts)


def cmd_doctor(args: argparse.Namespace) -> int:
    from ipufs import doctor

    findings, mounts = doctor.run(probe=not args.no_probe)
    if args.json:
        print(json.dumps(doctor.as_dict(findings, mounts), indent=2))
    else:
        for f in findings:
            print(f"{'ok ' if f.ok else 'NO '} {f.check}: {f.detail}")
        possible = all(f.ok for f in findings)
        print(f"mode: {'passthrough' if possible else 'page-cache'} would be used by a new mount")
        for f in doctor.run_modes(findings, mounts):
            print(f"{f.check}: {f.detail if f.ok else 'not possible: ' + f.detail}")
        uring = doctor.check_uring()
        print(f"{uring.check}: {uring.detail}")
        if not mounts:
            print("mounts: none")
        for m in mounts:
            state = "alive" if m.alive else "unknown" if "unknown" in m.detail else "DEAD"
            print(f"mount: {m.mountpoint} [{m.source}] {state}, mode {m.mode}, fast path {m.fast_path}, "
                  f"requests through {m.transport}: {m.detail}")
    return 0 if all(f.ok for f in findings[:2]) else 1


def _root(args: argparse.Namespace) -> Path:
    from ipufs.tools import devices

    return devices.root(args.dev)


def _answered(args: argparse.Namespace, root: Path) -> Any:
    """The tool's work on the IPUs in ``root``, ended with one line when
    their daemon has not answered within --timeout (tools/deadline.py)."""
    from ipufs.tools.deadline import answered_within

    return answered_within(args.command, args.timeout, root)


def _ipus(args: argparse.Namespace) -> list[int]:
    """The IPUs that -d names (a single or multi-IPU id, as `ipufs ls`
    prints them), or every IPU."""
    from ipufs.tools import devices, listing

    root = _root(args)
    if args.device_id is None:
        return devices.indices(root)
    return listing.listing(root).members(args.device_id)


def cmd_ls(args: argparse.Namespace) -> int:
    from ipufs.tools import listing

    root = _root(args)
    with _answered(args, root):
        result = listing.listing(root)
    print(json.dumps(listing.as_dict(result), indent=2) if args.json else listing.render(result))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from ipufs.tools import devices, info

    root = _root(args)
    with _answered(args, root):
        ids = _ipus(args)
        if args.ipu_count:
            print(len(devices.indices(root)))
            return 0
        if args.ipu_arch or args.tile_clock_speed:
            for index in ids:
                r = devices.registers(root, index)
                print(info.ARCH_NAMES.get(r["ARCH"], "unknown") if args.ipu_arch else f"{r['CLOCK']}MHz")
            return 0
        infos = [info.fields(root, i) for i in ids]
    print(json.dumps([info.as_dict(i) for i in infos], indent=2) if args.json else info.render(infos))
    return 0


def cmd_monitor(args: argparse.Namespace) -> int:
    from ipufs.tools import monitor

    root = _root(args)
    live = args.watch and sys.stdout.isatty()  # clear the screen only on a terminal
    try:
        while True:
            with _answered(args, root):
                rows = monitor.snapshot(root)
            if args.json:
                print(json.dumps({"time": time.time(), "ipus": rows}), flush=True)
            else:
                if live:
                    print("\033[H\033[2J", end="")
                if args.watch:
                    print(f"ipufs monitor  {time.strftime('%H:%M:%S')}  ({root})")
                print(monitor.render(rows, card_info=not args.no_card_info), flush=True)
            if not args.watch:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from ipufs.client import Device

    root = _root(args)
    with _answered(args, root):
        ids = _ipus(args)
    for index in ids:
        with _answered(args, root), Device(index, root) as dev:
            dev.reset()
            count = dev.read_register("RESET_COUNT")
        print(f"IPU {index} reset (reset count {count})")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ipufs.run import command as run

    command = args.command_args[1:] if args.command_args[:1] == ["--"] else args.command_args
    if not command:
        raise ValueError("name the command: ipufs run [options] -- COMMAND [ARGS...]")
    forwarded = settings.mount_argv(vars(args))  # the settings of RUN_SETTINGS it was given
    if args.dev and forwarded:
        raise ValueError("--dev uses an existing mount: mount options do not apply")
    try:
        return run.run(run.RunOptions(command, forwarded, Path(args.dev) if args.dev else None))
    except Exception as exc:  # ipufs run's own failure: 125, which COMMAND's statuses do not use
        _fail(args, exc)
        return run.FAILED


def cmd_docker(args: argparse.Namespace) -> int:
    from ipufs.tools import docker

    root = _root(args)
    ids = [] if args.all else (args.device_id or [])
    extra = args.docker_args[1:] if args.docker_args[:1] == ["--"] else args.docker_args
    groups = docker.options(args.engine, root, ids, use_cdi=args.cdi)
    if args.echo:
        print(docker.echo(args.engine, groups, extra))
        return 0
    argv = [args.engine, "run", *(arg for group in groups for arg in group), *extra]
    docker.check_image(args.engine, extra)
    os.execvp(argv[0], argv)


def cmd_cdi_hook(args: argparse.Namespace) -> int:
    from ipufs.container import hook

    return hook.main(args.links)


def cmd_cdi(args: argparse.Namespace) -> int:
    from ipufs.container import cdi
    from ipufs.tools import devices

    root = _root(args)
    ids = devices.indices(root)
    if not ids:
        raise ValueError(f"no IPUs in {root}")
    mount_dir = devices.mountpoint_of(root, ids[0])
    prefix = cdi.default_prefix(mount_dir) if args.prefix is None else cdi.check_prefix(args.prefix)
    print(json.dumps(cdi.spec(mount_dir, ids, prefix), indent=2))
    return 0


def cmd_device_plugin(args: argparse.Namespace) -> int:
    from ipufs.deviceplugin import require

    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # before gRPC loads: its INFO lines are noise here
    require()
    import threading

    from ipufs.deviceplugin.service import PluginConfig, check, run
    from ipufs import problems

    config = PluginConfig(dev=_root(args), resource_name=args.resource_name, socket_dir=Path(args.socket_dir),
                          endpoint=args.endpoint, cdi=args.cdi, cdi_prefix=args.cdi_prefix,
                          poll_interval=args.poll_interval, retry_interval=args.retry_interval,
                          sysfs_dir=Path(args.sysfs_dir) if args.sysfs_dir else None)
    try:
        check(config)
    except ValueError as exc:
        raise problems.Problem(str(exc), status=problems.USAGE) from None
    stop = threading.Event()

    def stopping(signum: int, frame: object) -> None:
        sd_notify("STOPPING=1")
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    run(config, stop, lambda status: sd_notify(f"READY=1\nSTATUS={status}"))
    return 0


class OneLineParser(argparse.ArgumentParser):
    """A parser whose every complaint is one line naming the problem and
    where to read more (subcommands inherit the class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


EPILOG = """\
examples:
  sudo ipufs mount                    publish 4 emulated IPUs at /run/ipufs, linked as /dev/ipuN*
  ipufs ls; ipufs info -d 0           list them, describe one (like gc-info -l, gc-info -i)
  ipufs monitor --watch               who holds which IPU, live (like watch gc-monitor)
  ipufs inject -d 0 parity --tile 3 --addr 0x40000
  ipufs umount /run/ipufs

exit status:
  0    success
  1    the operation failed: no devices, the daemon is gone, permission, a device error
  2    bad command line or configuration (the message names the option, file and key)
  130  interrupted by Ctrl-C
  141  the reader of the output went away (`ipufs info | head`): quiet, as other tools

files:
  /etc/ipufs/ipufs.toml   settings of `ipufs mount` (docs/systemd.md)
  /run/ipufs              the default mount point; MOUNTPOINT.ctl its control socket

Every command takes --help. Errors are one line on stderr: the problem, then the fix.
Shell completion: source <(ipufs completion bash). Documentation: docs/ (tools.md first)."""


def cmd_completion(args: argparse.Namespace) -> int:
    from ipufs import completion

    print(completion.bash(parser()), end="")
    return 0


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ipufs", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"ipufs {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cli_mount.add_commands(sub)

    rn = sub.add_parser("run", help="run a command with its own emulated IPUs, /dev and sysfs view",
                        description="Run COMMAND in a private mount namespace with its own IPUs at /dev/ipuN*, "
                                    "/sys/bus/pci/devices showing only them and the compatibility library "
                                    "preloaded (docs/compat.md). Exits with COMMAND's status (128+N for a "
                                    "signal; 125 when ipufs run fails, 126/127 when COMMAND cannot run).")
    rn.add_argument("--dev", help="use the existing mount (or directory of links to one) DIR instead of a new one")
    settings.add_options(rn, settings.RUN_SETTINGS)
    rn.add_argument("command_args", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")
    rn.set_defaults(func=cmd_run)

    u = sub.add_parser("umount", help="unmount an ipufs mount (the daemon then exits)")
    u.add_argument("mountpoint")
    u.add_argument("--abort", action="store_true",
                   help="abort the connection first (for a daemon that hangs): waiting callers fail at once")
    u.set_defaults(func=cmd_umount)

    d = sub.add_parser("doctor", help="check passthrough support and list ipufs mounts")
    d.add_argument("--json", action="store_true", help="print JSON")
    d.add_argument("--no-probe", action="store_true", help="skip the probe mount")
    d.set_defaults(func=cmd_doctor)

    def tool(name: str, help_: str) -> argparse.ArgumentParser:
        t = sub.add_parser(name, help=help_, description=help_)
        t.add_argument("--dev", help="directory of the nodes (default $IPUFS_MOUNT when set, else /dev if /dev/ipu0 exists, else /run/ipufs)")
        return t

    def waits(t: argparse.ArgumentParser) -> argparse.ArgumentParser:
        t.add_argument("--timeout", type=float, default=DAEMON_TIMEOUT, metavar="SECONDS",
                       help=f"give up when the daemon has not answered within this long (default "
                            f"{DAEMON_TIMEOUT:g}; it may be stopped)")
        return t

    ls = waits(tool("ls", "list the devices, like gc-info -l"))
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_ls)

    i = waits(tool("info", "describe devices, like gc-info --device-info"))
    i.add_argument("-d", "--device-id", type=int,
                   help="a device id as `ipufs ls` prints it: an IPU, or a multi-IPU device's members "
                        "(default: every IPU)")
    i.add_argument("--json", action="store_true", help="print JSON: typed values, keys with their units")
    what = i.add_mutually_exclusive_group()
    what.add_argument("--ipu-arch", action="store_true", help="print only the architecture (ipu1, ipu2, ipu21)")
    what.add_argument("--ipu-count", action="store_true", help="print only the number of IPUs")
    what.add_argument("--tile-clock-speed", action="store_true", help="print only the tile clock (MHz)")
    i.set_defaults(func=cmd_info)

    mon = waits(tool("monitor", "show the cards, the attached processes, signals and telemetry, like gc-monitor"))
    mon.add_argument("--watch", action="store_true",
                     help="refresh until Ctrl-C (the screen is cleared only on a terminal)")
    mon.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    mon.add_argument("--no-card-info", action="store_true", help="leave out the card table")
    mon.add_argument("--json", action="store_true", help="one JSON object (per refresh with --watch)")
    mon.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # the default now
    mon.set_defaults(func=cmd_monitor)

    r = waits(tool("reset", "reset a device, like gc-reset"))
    r.add_argument("-d", "--device-id", type=int, required=True,
                   help="an IPU, or a multi-IPU device (all its members are reset)")
    r.set_defaults(func=cmd_reset)

    cli_faults.add_commands(sub, tool)
    cli_exporter.add_commands(sub, tool)
    cli_isa.add_commands(sub, tool)
    cli_exec.add_commands(sub, tool)

    c = sub.add_parser("completion", help="print a shell completion script",
                       description="Print a completion script generated from these options. In bash: "
                                   "source <(ipufs completion bash), or save it as "
                                   "/usr/share/bash-completion/completions/ipufs.")
    c.add_argument("shell", choices=["bash"], help="the shell (bash)")
    c.set_defaults(func=cmd_completion)

    k = tool("docker", "run a container with IPUs passed in, like gc-docker")
    k.add_argument("--device-id", type=int, action="append",
                   help="an id `ipufs ls` prints: an IPU, or a multi-IPU device's members (repeatable; "
                        "default: every IPU)")
    k.add_argument("--all", action="store_true", help="pass every IPU (the default)")
    k.add_argument("--echo", action="store_true", help="print the command instead of running it")
    k.add_argument("--engine", default="docker", choices=["docker", "podman"], help="docker (default) or podman")
    k.add_argument("--no-cdi", dest="cdi", action="store_false",
                   help="bind the nodes even where the engine reads the mount's CDI spec")
    k.add_argument("docker_args", nargs=argparse.REMAINDER, help="-- then arguments for `docker run`")
    k.set_defaults(func=cmd_docker)

    cd = tool("cdi", "print the CDI spec of the IPUs in --dev (for /etc/cdi; docs/docker.md)")
    cd.add_argument("--prefix", help="before the device names (default: as `ipufs mount` would)")
    cd.set_defaults(func=cmd_cdi)

    hk = sub.add_parser("cdi-hook", help="the CDI hook of `ipufs mount --cdi-follow-restarts` (run by "
                        "container runtimes; docs/docker.md)")
    hk.add_argument("links", nargs="*", metavar="LINK=TARGET")
    hk.set_defaults(func=cmd_cdi_hook)

    dp = tool("device-plugin", "offer the IPUs to Kubernetes: a kubelet device plugin (docs/kubernetes.md)")
    dp.add_argument("--resource-name", default="graphcore.ai/ipu",
                    help="the extended resource pods ask for (default graphcore.ai/ipu)")
    dp.add_argument("--socket-dir", default="/var/lib/kubelet/device-plugins",
                    help="kubelet's device plugin directory, holding kubelet.sock (default %(default)s)")
    dp.add_argument("--endpoint", help="the plugin's socket name in that directory (default from the resource name)")
    dp.add_argument("--cdi", action="store_true",
                    help="give containers the devices of the mount's CDI spec (graphcore.ai/ipu=N) instead of "
                         "bind mounts, for runtimes that read CDI specs")
    dp.add_argument("--cdi-prefix", help="the prefix of those names, if the mount was given one (default: as "
                                         "`ipufs mount` chooses)")
    dp.add_argument("--sysfs-dir", help="where bind-mount answers keep the directories containers see at "
                                        "/sys/bus/pci/devices, the same path on the host (default "
                                        "SOCKET_DIR/ipufs-sysfs)")
    dp.add_argument("--poll-interval", type=float, default=1.0,
                    help="seconds between status reads when the daemon's trace says nothing (default 1)")
    dp.add_argument("--retry-interval", type=float, default=0.5,
                    help="seconds between tries to reach a daemon that is gone (default 0.5)")
    dp.set_defaults(func=cmd_device_plugin)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:  # name the subcommand that refused them, not just `ipufs`
        where = " ".join(str(w) for w in ("ipufs", args.command, getattr(args, "kind", None)) if w)
        p.exit(2, f"{where}: unrecognized arguments: {' '.join(extra)} (see `{where} --help`)\n")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="ipufs: %(levelname)s: %(message)s",
    )
    LogBudget.install(logging.getLogger().handlers)  # a flood of like lines is summed up
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except (Exception, KeyboardInterrupt) as exc:
        return _fail(args, exc)


def _fail(args: argparse.Namespace, exc: BaseException) -> int:
    """Say what went wrong in one line on stderr (never a traceback: -v
    logs it) and return the exit status (docs/tools.md)."""
    from ipufs import problems

    log.debug("%s failed", args.command, exc_info=exc)
    explained = problems.explain(exc)
    if isinstance(explained, problems.BrokenPipe):
        # Like other Unix tools: nothing to say when the reader went away.
        # Point stdout at /dev/null so the interpreter's last flush is quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return problems.BROKEN_PIPE
    if explained.status != problems.INTERRUPTED:
        print(f"ipufs {args.command}: {explained.line()}", file=sys.stderr)
    return explained.status


if __name__ == "__main__":
    sys.exit(main())
