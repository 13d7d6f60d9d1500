# The `ipufs` command. Each subcommand is a small function over the library;
# errors reach the user as one line and an exit status, never a traceback.
"""ipufs: emulated Graphcore IPU device nodes over FUSE."""
from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import trio

from ipufs import __version__

log = logging.getLogger("ipufs")


def _sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) about our state, when it is listening."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(address)
        s.sendall(message.encode())


def cmd_mount(args: argparse.Namespace) -> int:
    from ipufs.daemon.daemon import Daemon
    from ipufs.fuse.operations import Negotiated
    from ipufs.daemon import config as cfg

    settings: dict[str, Any] = {}
    if args.config or os.path.exists(cfg.DEFAULT_FILE) and args.config is None:
        settings.update(cfg.load(args.config or cfg.DEFAULT_FILE))
    given = {k: v for k, v in vars(args).items() if k in cfg.KEYS and v is not None}
    settings.update(given)
    config = cfg.daemon_config(settings)

    async def main() -> None:
        daemon = Daemon(config)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def serve(task_status: trio.TaskStatus[Negotiated]) -> None:
                    await daemon.run(task_status=task_status)
                    nursery.cancel_scope.cancel()  # unmounted from outside

                async def watch_signals() -> None:
                    async for signum in signals:
                        log.info("%s: unmounting %s", signal.Signals(signum).name, config.mountpoint)
                        _sd_notify("STOPPING=1")
                        nursery.cancel_scope.cancel()

                nursery.start_soon(watch_signals)
                await nursery.start(serve)
                fs = daemon.filesystem
                links = daemon.links
                log.info("%d x %s mounted at %s (%s%s)%s", config.ipus, config.profile, config.mountpoint,
                         fs.mode, f": {fs.mode_reason}" if fs.mode_reason else "",
                         f", linked in {config.dev_dir}" if links and links.made else "")
                _sd_notify(f"READY=1\nSTATUS={config.ipus} IPUs at {config.mountpoint} ({fs.mode})")

    try:
        trio.run(main)
    except BaseExceptionGroup as group:
        raise _alone(group) from None
    return 0


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


def cmd_umount(args: argparse.Namespace) -> int:
    from ipufs.fuse import mount as fmount

    mountpoint = os.path.abspath(args.mountpoint)
    if args.abort:
        fmount.abort(mountpoint)
    else:
        fmount.unmount(mountpoint)
    return 0


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
        if not mounts:
            print("mounts: none")
        for m in mounts:
            state = "alive" if m.alive else "DEAD"
            print(f"mount: {m.mountpoint} [{m.source}] {state}, mode {m.mode}: {m.detail}")
    return 0 if all(f.ok for f in findings[:2]) else 1


def _root(args: argparse.Namespace) -> Path:
    from ipufs.tools import devices

    return Path(args.dev) if args.dev else devices.default_root()


def cmd_ls(args: argparse.Namespace) -> int:
    from ipufs.tools import listing

    result = listing.listing(_root(args))
    print(json.dumps(listing.as_dict(result), indent=2) if args.json else listing.render(result))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from ipufs.tools import devices

    root = _root(args)
    ids = devices.indices(root) if args.device_id is None else [args.device_id]
    infos = [devices.info(root, i) for i in ids]
    if args.json:
        print(json.dumps([i.fields for i in infos], indent=2))
    else:
        print("\n\n".join("\n".join(f"{k}: {v}" for k, v in i.fields.items()) for i in infos))
    return 0


def cmd_monitor(args: argparse.Namespace) -> int:
    from ipufs.tools import monitor

    root = _root(args)
    try:
        while True:
            rows = monitor.snapshot(root)
            if args.json:
                print(json.dumps({"time": time.time(), "ipus": rows}), flush=True)
            else:
                if not args.once:
                    print("\033[H\033[2J", end="")
                print(f"ipufs monitor  {time.strftime('%H:%M:%S')}  ({root})")
                print(monitor.render(rows), flush=True)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from ipufs.client import Device

    with Device(args.device_id, _root(args)) as dev:
        dev.reset()
        count = dev.read_register("RESET_COUNT")
    print(f"IPU {args.device_id} reset (reset count {count})")
    return 0


def _control(args: argparse.Namespace) -> Any:
    from ipufs.client import Control
    from ipufs.tools import devices

    root = _root(args)
    return Control.of_mount(devices.mountpoint_of(root, devices.indices(root)[0]))


def _seconds(text: str) -> float:
    for suffix, scale in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def cmd_inject(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"kind": args.kind, "ipu": args.device_id}
    kind = args.kind
    if kind == "exception":
        request.update(cause=args.cause, tile=int(args.tile, 0), address=int(args.address, 0),
                       context=int(args.context, 0))
    elif kind == "parity":
        request.update(tile=int(args.tile, 0), address=int(args.address, 0))
    elif kind == "sync":
        request.update(zone=int(args.zone) if args.zone.isdigit() else args.zone,
                       action="arrive" if args.arrive else "complete")
    elif kind == "icu-timeout":
        request["for"] = _seconds(args.duration)
    elif kind == "telemetry":
        if args.temperature is not None:
            request["temperature_mc"] = round(args.temperature * 1000)
        if args.power is not None:
            request["power_mw"] = round(args.power * 1000)
        if args.clock is not None:
            request["clock_mhz"] = args.clock
    elif kind == "icu-message":
        request["words"] = [int(w, 0) for w in args.words]
    elif kind == "interrupt":
        request["source"] = args.source
    with _control(args) as control:
        if kind == "plan":
            answer = control.request("plan", toml=Path(args.file).read_text())
        else:
            answer = control.request("inject", **request)
    print(json.dumps(answer) if args.json else
          answer.get("fired", f"plan of {answer.get('faults')} faults loaded (seed {answer.get('seed')})"))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from ipufs.daemon.trace import render

    with _control(args) as control:
        control.sock.settimeout(None)
        request: dict[str, Any] = {"op": "trace", "kinds": args.kind or []}
        if args.device_id is not None:
            request["ipu"] = args.device_id
        control.sock.sendall(json.dumps(request).encode() + b"\n")
        first = json.loads(control.file.readline() or b'{"ok": false, "error": "no answer"}')
        if not first.get("ok"):
            raise ValueError(first.get("error"))
        seen = 0
        try:
            for line in control.file:
                event = json.loads(line)
                print(json.dumps(event) if args.json else render(event), flush=True)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
        except KeyboardInterrupt:
            pass
    return 0


def cmd_docker(args: argparse.Namespace) -> int:
    from ipufs.tools import docker

    root = _root(args)
    ids = [] if args.all else (args.device_id or [])
    extra = args.docker_args[1:] if args.docker_args[:1] == ["--"] else args.docker_args
    argv = docker.command(args.engine, root, ids, extra, use_cdi=args.cdi)
    if args.echo:
        print(shlex.join(argv))
        return 0
    docker.check_image(args.engine, extra)
    os.execvp(argv[0], argv)


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ipufs", description=__doc__)
    p.add_argument("--version", action="version", version=f"ipufs {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    m.set_defaults(func=cmd_mount)

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
        t.add_argument("--dev", help="directory of the nodes (default /dev if /dev/ipu0 exists, else /run/ipufs)")
        return t

    ls = tool("ls", "list the devices, like gc-info -l")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_ls)

    i = tool("info", "describe devices, like gc-info --device-info")
    i.add_argument("-d", "--device-id", type=int, help="the IPU (default: all)")
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=cmd_info)

    mon = tool("monitor", "watch attached processes, signals and telemetry, like gc-monitor")
    mon.add_argument("--once", action="store_true", help="print one snapshot and exit (for scripts)")
    mon.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    mon.add_argument("--json", action="store_true", help="one JSON object per refresh")
    mon.set_defaults(func=cmd_monitor)

    r = tool("reset", "reset a device, like gc-reset")
    r.add_argument("-d", "--device-id", type=int, required=True, help="the IPU")
    r.set_defaults(func=cmd_reset)

    inj = tool("inject", "make the device misbehave: faults for test authors (docs/faults.md)")
    inj.add_argument("-d", "--device-id", type=int, default=0, help="the IPU (default 0)")
    inj.add_argument("--json", action="store_true", help="print the daemon's answer as JSON")
    kinds = inj.add_subparsers(dest="kind", required=True, metavar="FAULT")
    e = kinds.add_parser("exception", help="raise an exception (signal 44)")
    e.add_argument("--cause", default="injected", help="misaligned, parity, invalid_address, ... (default injected)")
    e.add_argument("--tile", default="0")
    e.add_argument("--addr", dest="address", default="0")
    e.add_argument("--context", default="0")
    pa = kinds.add_parser("parity", help="mark a word of tile memory with bad parity")
    pa.add_argument("--tile", required=True)
    pa.add_argument("--addr", dest="address", required=True)
    sy = kinds.add_parser("sync", help="complete a sync (signal 46..49), or arrive at one with --arrive")
    sy.add_argument("zone", help="gs1, gs1h, gs2, gs2h, gs1-master, ... or a zone number")
    sy.add_argument("--arrive", action="store_true", help="arrive as if the host asked (GS2 waits for the group)")
    it = kinds.add_parser("icu-timeout", help="the ICU stops answering")
    it.add_argument("--for", dest="duration", default="0", help="how long: 2s, 500ms (default: until icu-recover)")
    kinds.add_parser("icu-recover", help="the ICU answers again")
    kinds.add_parser("link-down", help="the link goes down (exception LINK, STATUS.LINK_DOWN)")
    kinds.add_parser("link-up", help="the link comes back")
    te = kinds.add_parser("telemetry", help="change telemetry")
    te.add_argument("--temperature", type=float, help="degrees Celsius")
    te.add_argument("--power", type=float, help="watts")
    te.add_argument("--clock", type=int, help="MHz")
    im = kinds.add_parser("icu-message", help="the ICU posts a message to the host (signal 45)")
    im.add_argument("words", nargs=5, help="five u32 words")
    kinds.add_parser("reset", help="reset the device from the device side")
    ir = kinds.add_parser("interrupt", help="raise an interrupt source directly")
    ir.add_argument("source", help="exception, icu_doorbell, gs1_e0, gs1_e1, gs2_e0, gs2_e1")
    pl = kinds.add_parser("plan", help="load a TOML fault plan, replacing the one in force")
    pl.add_argument("file")
    inj.set_defaults(func=cmd_inject)

    tr = tool("trace", "follow what clients do and what the device does back (docs/faults.md)")
    tr.add_argument("-d", "--device-id", type=int, help="only this IPU")
    tr.add_argument("--kind", action="append", help="only these kinds (repeatable): open, ioctl, signal, ...")
    tr.add_argument("--json", action="store_true", help="JSON lines")
    tr.add_argument("--count", type=int, help="stop after this many events")
    tr.set_defaults(func=cmd_trace)

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

    c = tool("cdi", "print the CDI spec of the IPUs in --dev (for /etc/cdi; docs/docker.md)")
    c.add_argument("--prefix", help="before the device names (default: as `ipufs mount` would)")
    c.set_defaults(func=cmd_cdi)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="ipufs: %(levelname)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        print(f"ipufs {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
