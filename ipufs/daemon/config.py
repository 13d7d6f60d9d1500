# The daemon's configuration: DaemonConfig, and the configuration file
# (/etc/ipufs/ipufs.toml) holding the same settings as `ipufs mount`'s
# options. Options given on the command line win over the file.
from __future__ import annotations

import grp
import json
import os
import pwd
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ipufs.container import cdi
from ipufs.daemon.settings import BY_KEY, SETTINGS
from ipufs.driver.nodes import Ownership
from ipufs.driver.while_attached import EXCLUSIVE
from ipufs.driver.while_attached import MODES as WHILE_ATTACHED
from ipufs.fuse.devfuse import SPIN
from ipufs.model.profile import DEFAULT_PROFILE, PROFILES, Profile

DEFAULT_MOUNTPOINT = "/run/ipufs"
URING_MODES = ("auto", "on", "off")
MAX_IPUS = 4096


@dataclass
class DaemonConfig:
    mountpoint: str = DEFAULT_MOUNTPOINT
    ipus: int = 4
    profile: str = DEFAULT_PROFILE
    ownership: Ownership = field(default_factory=Ownership)
    while_attached: str = EXCLUSIVE  # who may change an attached IPU (ipufs/driver/while_attached.py)
    control_group: int | None = None  # may inject faults and load plans, with root and the daemon's user
    passthrough: bool = True
    state_dir: Path | None = None
    group_size: int | None = None  # IPUs per GS2 group (default: per board)
    control: str | None = None  # control socket path (default: MOUNTPOINT.ctl)
    link_dev: bool = False  # link DEV_DIR/ipuN* to the nodes (the CLI's default as root)
    dev_dir: str = "/dev"
    fault_plan: str | None = None  # a TOML fault plan to start with
    trace_file: str | None = None  # write the trace here (JSON lines)
    trace_max_bytes: int = 64 << 20  # then rotate to TRACE_FILE.1
    spin_us: int = round(SPIN * 1e6)  # the reader's wait for a next request before it sleeps
    uring: str = "auto"  # FUSE over io_uring: auto, on or off (ipufs/fuse/uring.py)
    fast_path: bool = True  # the native readers answer the hot requests (ipufs/driver/fast_path.py)
    cdi_dir: str | None = None  # write the mount's CDI spec here (the CLI's default as root: /var/run/cdi)
    cdi_prefix: str | None = None  # before the CDI device names (default: container.cdi.default_prefix)
    cdi_follow_restarts: bool = False  # CDI devices that follow daemon restarts (container/follow.py)
    exporter: str | None = None  # HOST:PORT: serve Prometheus metrics there too (ipufs/monitoring/)

    @property
    def control_path(self) -> str:
        return self.control or self.mountpoint.rstrip("/") + ".ctl"

    def validate(self) -> Profile:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r} (known: {', '.join(PROFILES)})")
        if not 0 < self.ipus <= MAX_IPUS:
            raise ValueError(f"--ipus must be between 1 and {MAX_IPUS}")
        if not 0 <= self.ownership.mode <= 0o1777:
            raise ValueError("--mode must be permission bits, such as 0660")
        if not 0 <= self.spin_us <= 10_000:
            raise ValueError("--spin-us must be between 0 and 10000")
        if self.while_attached not in WHILE_ATTACHED:
            raise ValueError(f"--while-attached must be one of {', '.join(WHILE_ATTACHED)}, "
                             f"not {self.while_attached!r}")
        if self.uring not in URING_MODES:
            raise ValueError(f"--uring must be one of {', '.join(URING_MODES)}, not {self.uring!r}")
        if self.cdi_prefix is not None:
            cdi.check_prefix(self.cdi_prefix)
        return PROFILES[self.profile]


DEFAULT_FILE = "/etc/ipufs/ipufs.toml"
#: The TOML type each setting takes in the file (ipus = 4, mode = "0660").
TYPES: dict[str, tuple[type, ...]] = {s.key: s.types for s in SETTINGS}
#: The settings of a file or of `ipufs mount`: DaemonConfig's fields, with
#: ownership given as owner, group and mode, and cdi (whether to write a
#: CDI spec: cdi_dir's default). Checked against the table at import.
KEYS = {f.name for f in fields(DaemonConfig)} - {"ownership"} | {"owner", "group", "mode", "cdi"}
if KEYS != set(TYPES):
    raise ImportError(f"DaemonConfig and the settings table disagree: {sorted(KEYS ^ set(TYPES))}")
_TOML_NAMES = {str: "a string", int: "an integer", bool: "true or false"}


def uid_of(value: str | int) -> int:
    if isinstance(value, int) or value.isdigit():
        return int(value)
    try:
        return pwd.getpwnam(value).pw_uid
    except KeyError:
        raise ValueError(f"owner: there is no user named {value}") from None


def gid_of(value: str | int, key: str = "group") -> int:
    if isinstance(value, int) or value.isdigit():
        return int(value)
    try:
        return grp.getgrnam(value).gr_gid
    except KeyError:
        raise ValueError(f"{key}: there is no group named {value} (create it with `groupadd {value}`, "
                         "or name an existing one)") from None


def control_gid_of(value: str | int) -> int:
    return gid_of(value, "control_group")


def mode_of(value: str | int) -> int:
    """Permission bits, written in octal: "0660" (a string; in the file a
    TOML integer such as 660 is refused, as it would be read in decimal)."""
    if isinstance(value, int):
        return value
    try:
        return int(value, 8)
    except ValueError:
        raise ValueError(f"mode {value} is not permission bits in octal, such as 0660") from None


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings of a configuration file, each checked for its type;
    every error names the file and the key."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    settings = data.get("ipufs", data)
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: [ipufs] must be a table of settings")
    unknown = set(settings) - KEYS
    if unknown:
        raise ValueError(f"{path}: unknown settings {', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
    for key, value in settings.items():
        kinds = TYPES[key]
        if key == "mode" and isinstance(value, int) and not isinstance(value, bool):
            meant = f"0{value}" if set(str(value)) <= set("01234567") else f"0{value:o}"
            raise ValueError(f"{path}: mode = {value} is a TOML integer, which is decimal, not permission "
                             f'bits; write them as an octal string: mode = "{meant}"')
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            want = " or ".join(_TOML_NAMES[k] for k in kinds)
            raise ValueError(f"{path}: {key} = {json.dumps(value, default=str)} must be {want}, "
                             f"such as {key} = {BY_KEY[key].example}")
    for key, convert in (("owner", uid_of), ("group", gid_of), ("control_group", control_gid_of), ("mode", mode_of)):
        if key in settings:
            try:
                convert(settings[key])
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
    return dict(settings)


def daemon_config(settings: dict[str, Any]) -> DaemonConfig:
    """A DaemonConfig from merged settings (file, then command line); what
    they leave out keeps DaemonConfig's default."""
    s, d = settings, DaemonConfig()
    o = d.ownership
    return DaemonConfig(
        mountpoint=os.path.abspath(s.get("mountpoint", d.mountpoint)),
        ipus=int(s.get("ipus", d.ipus)),
        profile=str(s.get("profile", d.profile)),
        ownership=Ownership(uid=uid_of(s.get("owner", o.uid)), gid=gid_of(s.get("group", o.gid)),
                            mode=mode_of(s.get("mode", o.mode))),
        while_attached=str(s.get("while_attached", d.while_attached)),
        control_group=None if s.get("control_group") is None else control_gid_of(s["control_group"]),
        passthrough=bool(s.get("passthrough", d.passthrough)),
        state_dir=Path(s["state_dir"]).resolve() if s.get("state_dir") else None,
        group_size=int(s["group_size"]) if s.get("group_size") else None,
        control=s.get("control"),
        link_dev=bool(s.get("link_dev", os.geteuid() == 0)),
        dev_dir=str(s.get("dev_dir", d.dev_dir)),
        fault_plan=s.get("fault_plan"),
        trace_file=s.get("trace_file"),
        trace_max_bytes=int(s.get("trace_max_bytes", d.trace_max_bytes)),
        spin_us=int(s.get("spin_us", d.spin_us)),
        uring=str(s.get("uring", d.uring)),
        fast_path=bool(s.get("fast_path", d.fast_path)),
        cdi_dir=(None if not s.get("cdi", True) else
                 str(s["cdi_dir"]) if s.get("cdi_dir") else cdi.DEFAULT_DIR if os.geteuid() == 0 else None),
        cdi_prefix=None if s.get("cdi_prefix") is None else str(s["cdi_prefix"]),
        cdi_follow_restarts=bool(s.get("cdi_follow_restarts", d.cdi_follow_restarts)),
        exporter=None if s.get("exporter") is None else str(s["exporter"]),
    )
