# The `ipufs` command: mount, umount, doctor. Each subcommand is a small
# function over the library; errors reach the user as one line and an exit
# status, never a traceback.
from __future__ import annotations

import argparse
import grp
import json
import logging
import os
import pwd
import signal
import socket
import sys
from pathlib import Path

import trio

from ipufs import __version__

log = logging.getLogger("ipufs")


def _uid(value: str) -> int:
    return int(value) if value.isdigit() else pwd.getpwnam(value).pw_uid


def _gid(value: str) -> int:
    return int(value) if value.isdigit() else grp.getgrnam(value).gr_gid


def _mode(value: str) -> int:
    return int(value, 8)


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
    from ipufs.driver.daemon import Daemon, DaemonConfig
    from ipufs.driver.filesystem import Ownership
    from ipufs.fuse.operations import Negotiated

    config = DaemonConfig(
        mountpoint=os.path.abspath(args.mountpoint),
        ipus=args.ipus,
        profile=args.profile,
        ownership=Ownership(uid=args.owner, gid=args.group, mode=args.mode),
        passthrough=not args.no_passthrough,
        state_dir=Path(args.state_dir).resolve() if args.state_dir else None,
    )

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
                log.info("%d x %s mounted at %s (%s%s)", config.ipus, config.profile,
                         config.mountpoint, fs.mode, f": {fs.mode_reason}" if fs.mode_reason else "")
                _sd_notify(f"READY=1\nSTATUS={config.ipus} IPUs at {config.mountpoint} ({fs.mode})")

    trio.run(main)
    return 0


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ipufs", description=__doc__ or "Emulated Graphcore IPU device nodes over FUSE.")
    p.add_argument("--version", action="version", version=f"ipufs {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("mount", help="publish emulated IPUs (runs in the foreground)")
    m.add_argument("mountpoint", nargs="?", default="/run/ipufs", help="where to mount (default /run/ipufs)")
    m.add_argument("--ipus", type=int, default=4, help="number of IPUs (default 4)")
    m.add_argument("--profile", default="ipu2", help="device profile: ipu1, ipu2 or ipu21 (default ipu2)")
    m.add_argument("--owner", type=_uid, default=0, help="owner of the nodes (name or uid; default root)")
    m.add_argument("--group", type=_gid, default=0, help="group of the nodes (name or gid; default root)")
    m.add_argument("--mode", type=_mode, default=0o660, help="permission bits of the nodes (default 0660)")
    m.add_argument("--state-dir", help="keep BAR memory in files under this directory")
    m.add_argument("--no-passthrough", action="store_true",
                   help="serve BARs through the page cache even where passthrough works")
    m.set_defaults(func=cmd_mount)

    u = sub.add_parser("umount", help="unmount an ipufs mount (the daemon then exits)")
    u.add_argument("mountpoint")
    u.add_argument("--abort", action="store_true",
                   help="abort the connection first (for a daemon that hangs): callers get ENOTCONN")
    u.set_defaults(func=cmd_umount)

    d = sub.add_parser("doctor", help="check passthrough support and list ipufs mounts")
    d.add_argument("--json", action="store_true", help="print JSON")
    d.add_argument("--no-probe", action="store_true", help="skip the probe mount")
    d.set_defaults(func=cmd_doctor)
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
