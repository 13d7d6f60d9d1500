# The test authors' commands of `ipufs`: `inject` (one subcommand per fault
# kind, built from the table of ipufs/daemon/fault_kinds.py, plus `plan`)
# and `trace`. Both talk to the daemon's control socket (docs/faults.md,
# docs/control.md); every mistake is one line on stderr and a non-zero exit.
from __future__ import annotations

import argparse
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipufs.daemon import small_file
from ipufs.daemon.fault_kinds import KINDS, FaultKind
from ipufs.daemon.fields import Choice, Field, Flag, Integer, Words
from ipufs.tools.deadline import DAEMON_TIMEOUT

#: Where `ipufs inject` keeps each field's value among the parsed arguments.
_DEST = "field_"


def _root(args: argparse.Namespace) -> Path:
    from ipufs.tools import devices

    return devices.root(args.dev)


def control(args: argparse.Namespace) -> Any:
    """The control connection of the daemon serving the IPUs under --dev;
    a one-line Problem with the fix when there is none, or when the
    daemon does not answer within --timeout."""
    from ipufs.tools import devices
    from ipufs.tools.deadline import answered_within

    root = _root(args)
    with answered_within(args.command, args.timeout, root):
        return devices.control_of(root, args.timeout)


def _refusal(kind: FaultKind, error: str) -> str:
    """The daemon's refusal, naming the option the user typed."""
    for f in kind.fields:
        if f.option and error.startswith(f"{f.name} must"):
            return f"{f.option}: {error}"
    return error


def cmd_inject(args: argparse.Namespace) -> int:
    from ipufs.client import ControlError

    if args.kind == "plan":
        if (args.file is None) == (not args.clear):
            raise ValueError("give a plan FILE, or --clear to remove the plan in force")
        try:
            text = "" if args.clear else small_file.read(args.file).decode()
        except UnicodeDecodeError:
            raise ValueError(f"{args.file}: not UTF-8 text") from None
        with control(args) as c:
            try:
                answer = c.request("plan", toml=text)
            except ControlError as exc:
                raise ValueError(f"{args.file}: {exc}") from None
        print(json.dumps(answer) if args.json else
              "fault plan cleared" if args.clear else
              f"fault plan of {answer['faults']} faults loaded (seed {answer['seed']})")
        return 0
    kind = KINDS[args.kind]
    request: dict[str, Any] = {"kind": kind.name, "ipu": args.device_id}
    for f in kind.fields:
        if isinstance(f, Words):
            request[f.name] = [getattr(args, f"{_DEST}{f.name}_{i}") for i in range(f.count)]
            continue
        value = getattr(args, _DEST + f.name, None)
        if value is not None:
            request[f.name] = value
    with control(args) as c:
        try:
            answer = c.request("inject", **request)
        except ControlError as exc:
            raise ValueError(_refusal(kind, str(exc))) from None
    print(json.dumps(answer) if args.json else answer["fired"])
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from ipufs.client import ControlError
    from ipufs.daemon.trace import render

    with control(args) as c:
        events = c.trace(args.device_id, args.kind or [])
        seen = 0
        try:
            for event in events:
                print(json.dumps(event) if args.json else render(event), flush=True)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
        except ControlError as exc:
            raise ValueError(str(exc)) from None
        except KeyboardInterrupt:
            pass
    return 0


def _common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """-d, --json and --dev, before or after the fault's name."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    parser.add_argument("-d", "--device-id", type=int, help="the IPU (default 0)",
                        **(default or {"default": 0}))
    parser.add_argument("--json", action="store_true", help="print the daemon's answer as JSON", **default)
    parser.add_argument("--dev", help="directory of the nodes (default /dev if /dev/ipu0 exists, "
                                      "else /run/ipufs)", **default)
    _timeout_option(parser, **default)


def _timeout_option(parser: argparse.ArgumentParser, **default: Any) -> None:
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help=f"give up when the daemon has not answered within this long (default "
                             f"{DAEMON_TIMEOUT:g}; it may be stopped)", **(default or {"default": DAEMON_TIMEOUT}))


def _converter(f: Field) -> Callable[[str], Any]:
    """f.from_text, its complaint shown as it is (argparse shows only a
    type's name for a plain ValueError)."""

    def convert(text: str) -> Any:
        try:
            return f.from_text(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _field_argument(parser: argparse.ArgumentParser, f: Field) -> None:
    dest = _DEST + f.name
    default = "" if f.required or f.optional or isinstance(f, Flag) else f" (default {f.default})"
    if isinstance(f, Flag):
        parser.add_argument(f.option or f.name, dest=dest, action="store_const", const=True, help=f.help)
    elif isinstance(f, Words):
        # One positional per word, so that usage reads W0 W1 W2 W3 W4.
        for i in range(f.count):
            parser.add_argument(f"{dest}_{i}", type=_converter(f), metavar=f"{f.metavar or 'W'}{i}",
                                help=f"{f.help}: word {i} (decimal, or 0x hex)" if i == 0 else f"word {i}")
    else:
        if isinstance(f, Choice):
            takes = ", ".join(f.names) + ", or a number"
        elif isinstance(f, Integer) and f.scale != 1:
            takes = f"in {f.unit}"
        else:
            takes = f.takes()
        text = f"{f.help}: {takes}{default}"
        if f.option:
            parser.add_argument(f.option, dest=dest, type=_converter(f), required=f.required, help=text,
                                metavar=f.metavar or f.name.upper())
        else:
            parser.add_argument(dest, nargs=None if f.required else "?", type=_converter(f), help=text,
                                metavar=f.metavar or f.name.upper())


def add_commands(sub: Any, tool: Any) -> None:
    """Add `inject` and `trace` to the subcommands ``sub``; ``tool(name,
    help)`` makes a subcommand with the tools' common --dev."""
    inj = sub.add_parser("inject", help="make the device misbehave: faults for test authors (docs/faults.md)",
                         description="Make the device misbehave (docs/faults.md). Options may come before "
                                     "or after the fault's name.")
    _common(inj, suppress=False)
    kinds = inj.add_subparsers(dest="kind", required=True, metavar="FAULT")
    for kind in KINDS.values():
        k = kinds.add_parser(kind.name, help=kind.help, description=f"{kind.help}. A client sees: {kind.sees}.")
        for f in kind.fields:
            _field_argument(k, f)
        _common(k, suppress=True)
    pl = kinds.add_parser("plan", help="load a TOML fault plan, replacing the one in force (--clear: remove it)")
    pl.add_argument("file", nargs="?", help="the plan (docs/faults.md)")
    pl.add_argument("--clear", action="store_true", help="remove the plan in force")
    _common(pl, suppress=True)
    inj.set_defaults(func=cmd_inject)

    tr = tool("trace", "follow what clients do and what the device does back (docs/faults.md)")
    tr.add_argument("-d", "--device-id", type=int, help="only this IPU")
    tr.add_argument("--kind", action="append", help="only these kinds (repeatable): open, ioctl, signal, ...")
    tr.add_argument("--json", action="store_true", help="JSON lines")
    tr.add_argument("--count", type=int, help="stop after this many events")
    _timeout_option(tr)
    tr.set_defaults(func=cmd_trace)
