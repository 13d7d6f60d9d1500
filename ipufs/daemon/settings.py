# The mount settings, each declared once: its TOML key and types, its help,
# an example value, how the command line takes it, whether `ipufs run`
# passes it on, and whether the shipped systemd/ipufs.toml sets it (the
# transports' switches come from their own table, ipufs/fuse/
# transports.py). The configuration file's type checks (config.py), the
# shipped file and its copy in docs/systemd.md (`./dev generate`), and the
# options of both `ipufs mount` and `ipufs run` are made from this table;
# DaemonConfig is what the settings build, checked against the table at
# import.
from __future__ import annotations

import argparse
import enum
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ipufs.fuse.transport import Switch
from ipufs.fuse.transports import SWITCHES
from ipufs.model.profile import DEFAULT_PROFILE, PROFILES


class Form(enum.Enum):
    """How the command line takes a setting."""

    VALUE = "value"  # --key VALUE
    OFF = "off"  # --no-key turns on-by-default behaviour off (the file says key = false)
    ON = "on"  # --key turns it on (the file says key = true)
    POSITIONAL = "positional"  # the mount point: `ipufs mount [MOUNTPOINT]`


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    types: tuple[type, ...]  # the TOML types the file may give
    help: str  # one line: --help, and the comment in the shipped file
    example: str  # a value in TOML's form
    form: Form = Form.VALUE
    shipped: bool = False  # the shipped file sets it (else shows it commented out)
    run: bool = False  # `ipufs run` takes it and passes it on to its daemon
    off_help: str = ""  # Form.OFF: what --no-key does, for --help

    @property
    def flag(self) -> str:
        """The command-line option: --key, --no-key."""
        name = self.key.replace("_", "-")
        return f"--no-{name}" if self.form is Form.OFF else f"--{name}"

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """Add this setting's option to ``parser`` (unset: None, so the
        file or the default decides)."""
        if self.form is Form.POSITIONAL:
            parser.add_argument(self.key, nargs="?", default=None, help=self.help)
        elif self.form is Form.VALUE:
            parser.add_argument(self.flag, dest=self.key, type=int if self.types == (int,) else str,
                                help=self.help)
        else:
            parser.add_argument(self.flag, dest=self.key, action="store_const", const=self.form is Form.ON,
                                help=self.off_help if self.form is Form.OFF else self.help)

    def argv(self, value: object) -> list[str]:
        """The option that gives ``value`` (as parsed by add_to) to
        `ipufs mount`; [] for None."""
        if value is None:
            return []
        if self.form in (Form.ON, Form.OFF):
            return [self.flag]
        return [self.flag, str(value)]


def _profiles() -> str:
    names = list(PROFILES)
    return f"device profile: {', '.join(names[:-1])} or {names[-1]} (default {DEFAULT_PROFILE})"


S, I, B = (str,), (int,), (bool,)


def switch_setting(switch: Switch) -> Setting:
    """The setting of a transport's switch: KEY = "auto", "on" or "off"."""
    return Setting(switch.key, S, switch.help, f'"{switch.default}"', run=True)


#: Every setting, in the order --help and the shipped file show them.
SETTINGS: tuple[Setting, ...] = (
    Setting("mountpoint", S, "where to mount (default /run/ipufs)", '"/run/ipufs"', Form.POSITIONAL, shipped=True),
    Setting("ipus", I, "number of IPUs (default 4)", "4", shipped=True, run=True),
    Setting("profile", S, _profiles(), f'"{DEFAULT_PROFILE}"', shipped=True, run=True),
    Setting("owner", (str, int), "owner of the nodes and the control socket (name or uid; default root)",
            '"root"', shipped=True),
    Setting("group", (str, int), "group of the nodes (name or gid; default root): put IPU users in it",
            '"root"', shipped=True),
    Setting("mode", S, "permission bits of the nodes, in octal (default 0660)", '"0660"', shipped=True, run=True),
    Setting("while_attached", S, "who may change an IPU while a process is attached to it: exclusive (the "
            "default: that process and root; others may read, not write, reset or inject faults) or shared "
            "(everyone who may open the nodes; docs/filesystem.md)", '"exclusive"', shipped=True, run=True),
    Setting("control_group", (str, int), "a group whose members may inject faults and load fault plans "
            "through the control socket (name or gid; default: root and the daemon's user alone)", '"adm"'),
    Setting("link_dev", B, "link /dev/ipuN* to the nodes (the default as root; never over a real device)",
            "true", Form.OFF, shipped=True, off_help="do not link /dev/ipuN* to the nodes"),
    Setting("passthrough", B, "map BARs zero-copy where FUSE passthrough works (the default); false: "
            "serve them through the page cache", "true", Form.OFF, shipped=True, run=True,
            off_help="serve BARs through the page cache even where passthrough works"),
    Setting("state_dir", S, "keep BAR memory in files under this directory, across restarts",
            '"/var/lib/ipufs"', run=True),
    Setting("group_size", I, "IPUs per GS2 group (default: per board)", "4", run=True),
    Setting("spin_us", I, "after answering a request, keep looking for the next one (and for stores to "
            "mapped registers) this many µs before sleeping (default 50; 0 saves CPU, costs latency: "
            "docs/performance.md)", "50", run=True),
    *map(switch_setting, SWITCHES.values()),  # the transports' switches (ipufs/fuse/transports.py)
    Setting("fast_path", B, "answer the hot requests (MAILBOX_READ_ONLY, MAILBOX_GET_OFFSETS) in "
            "native code, without Python, while no trace or fault plan needs each one (the default; "
            "docs/serving.md)", "true", Form.OFF, run=True,
            off_help="serve every request in Python (for comparison: docs/performance.md)"),
    Setting("control", S, "control socket path (default MOUNTPOINT.ctl)", '"/run/ipufs.ctl"'),
    Setting("dev_dir", S, "where to make the /dev links (default /dev)", '"/dev"'),
    Setting("fault_plan", S, "a TOML fault plan to start with (docs/faults.md)", '"/etc/ipufs/faults.toml"',
            run=True),
    Setting("trace_file", S, "write the trace to this file (JSON lines)", '"/var/log/ipufs/trace.jsonl"',
            run=True),
    Setting("trace_max_bytes", I, "past this size, move the trace file to TRACE_FILE.1 and start again "
            "(default 64 MiB)", "67108864", run=True),
    Setting("exporter", S, "also serve Prometheus metrics of the IPUs at HOST:PORT, as `ipufs exporter` "
            "does (docs/monitoring.md)", '"127.0.0.1:9842"'),
    Setting("cdi", B, "write a CDI spec for podman, docker 25+, containerd and CRI-O (the default as root; "
            "docs/docker.md)", "true", Form.OFF, shipped=True, off_help="write no CDI spec"),
    Setting("cdi_dir", S, "where to write the CDI spec (default /var/run/cdi)", '"/var/run/cdi"'),
    Setting("cdi_prefix", S, "before the CDI device names (default: none for /run/ipufs, else the mount "
            "point's last component: graphcore.ai/ipu=PREFIX-0; docs/docker.md)", '""'),
    Setting("cdi_follow_restarts", B, "CDI devices that a restarted daemon reaches in running containers "
            "(a hook links /dev/ipuN* into a bound directory; docs/docker.md)", "false", Form.ON),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
if len(BY_KEY) != len(SETTINGS) or any(bool(s.off_help) != (s.form is Form.OFF) for s in SETTINGS):
    raise ImportError("a mount setting is declared twice, or an off switch has no help")  # fail at import
#: The settings `ipufs run` takes.
RUN_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.run)


def add_options(parser: argparse.ArgumentParser, settings: Iterable[Setting] | None = None) -> None:
    """Add the options of ``settings`` (default: every setting)."""
    for setting in SETTINGS if settings is None else settings:
        setting.add_to(parser)


def given(options: Mapping[str, Any], settings: Iterable[Setting] | None = None) -> dict[str, Any]:
    """The settings a command line gave (parsed by add_options)."""
    return {s.key: options[s.key] for s in (SETTINGS if settings is None else settings)
            if options.get(s.key) is not None}


def mount_argv(options: Mapping[str, Any], settings: Iterable[Setting] | None = None) -> list[str]:
    """`ipufs mount` options that give the same settings as ``options``
    (default: those `ipufs run` takes)."""
    return [arg for s in (RUN_SETTINGS if settings is None else settings) for arg in s.argv(options.get(s.key))]


def example_file() -> str:
    """The shipped systemd/ipufs.toml: every setting with its help, those
    the service sets given, the rest commented out."""
    lines = ["# ipufs daemon settings: the same as `ipufs mount`'s options, which win",
             "# when given on the command line (docs/systemd.md). Made by `./dev generate`",
             "# from ipufs/daemon/settings.py.", "", "[ipufs]"]
    for s in SETTINGS:
        lines += ["# " + line for line in textwrap.wrap(s.help, 74)]
        lines += [f"{'' if s.shipped else '# '}{s.key} = {s.example}", ""]
    return "\n".join(lines)
