# The daemon's configuration: DaemonConfig, and the configuration file
# (/etc/ipufs/ipufs.toml) holding the same settings as `ipufs mount`'s
# options. Options given on the command line win over the file. A setting
# reaches the DaemonConfig field of its name by itself; only the fields
# built otherwise (BUILT) say how.
from __future__ import annotations

import grp
import json
import os
import pwd
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ipufs.container import cdi
from ipufs.daemon import small_file
from ipufs.daemon.settings import BY_KEY, SETTINGS
from ipufs.driver.nodes import Ownership
from ipufs.driver.while_attached import EXCLUSIVE
from ipufs.driver.while_attached import MODES as WHILE_ATTACHED
from ipufs.fuse import transports
from ipufs.fuse.devfuse import SPIN
from ipufs.model.profile import DEFAULT_PROFILE, PROFILES, Profile

DEFAULT_MOUNTPOINT = "/run/ipufs"
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
    #: The transports' switches by key (uring = auto, on or off: ipufs/fuse/
    #: transports.py); a switch left out is auto.
    transports: dict[str, str] = field(default_factory=dict)
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
        transports.check(self.transports)
        if self.cdi_prefix is not None:
            cdi.check_prefix(self.cdi_prefix)
        return PROFILES[self.profile]


DEFAULT_FILE = "/etc/ipufs/ipufs.toml"
#: The TOML type each setting takes in the file (ipus = 4, mode = "0660").
TYPES: dict[str, tuple[type, ...]] = {s.key: s.types for s in SETTINGS}
#: The settings of a file or of `ipufs mount`: DaemonConfig's fields, with
#: ownership given as owner, group and mode, cdi (whether to write a CDI
#: spec: cdi_dir's default), and the transports' switches. Checked against
#: the table at import.
KEYS = ({f.name for f in fields(DaemonConfig)} - {"ownership", "transports"}
        | {"owner", "group", "mode", "cdi"} | set(transports.SWITCHES))
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
    every error names the file and the key. A file that is not a regular
    file, or is larger than small_file.MAX_BYTES, is refused unread."""
    text = small_file.read(path)
    try:
        data = tomllib.loads(text.decode())
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not valid TOML: not UTF-8 text") from None
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


def _ownership(s: Mapping[str, Any]) -> Ownership:
    o = Ownership()
    return Ownership(uid=uid_of(s.get("owner", o.uid)), gid=gid_of(s.get("group", o.gid)),
                     mode=mode_of(s.get("mode", o.mode)))


def _cdi_dir(s: Mapping[str, Any]) -> str | None:
    if not s.get("cdi", True):
        return None
    return str(s["cdi_dir"]) if s.get("cdi_dir") else cdi.DEFAULT_DIR if os.geteuid() == 0 else None


#: The DaemonConfig fields that are not their setting's value as given,
#: each built from the merged settings. Every other field is the value of
#: the setting of its name, of the setting's type, or keeps its default;
#: so a new setting needs no line here (checked at import).
BUILT: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "mountpoint": lambda s: os.path.abspath(s.get("mountpoint", DEFAULT_MOUNTPOINT)),
    "ownership": _ownership,
    "state_dir": lambda s: Path(s["state_dir"]).resolve() if s.get("state_dir") else None,
    "group_size": lambda s: int(s["group_size"]) if s.get("group_size") else None,
    "link_dev": lambda s: bool(s.get("link_dev", os.geteuid() == 0)),  # root links by default
    "cdi_dir": _cdi_dir,
    "control_group": lambda s: None if s.get("control_group") is None else control_gid_of(s["control_group"]),
    "transports": lambda s: {key: str(s[key]) for key in transports.SWITCHES if s.get(key) is not None},
}
_AS: dict[tuple[type, ...], Callable[[Any], Any]] = {(int,): int, (str,): str, (bool,): bool}


def _plain() -> list[str]:
    """The fields that are their setting's value as given."""
    return [f.name for f in fields(DaemonConfig) if f.name not in BUILT]


if any(TYPES.get(name) not in _AS for name in _plain()):  # fail at import
    raise ImportError(f"DaemonConfig fields without a setting of one type: "
                      f"{[n for n in _plain() if TYPES.get(n) not in _AS]}")


def daemon_config(settings: Mapping[str, Any]) -> DaemonConfig:
    """A DaemonConfig from merged settings (file, then command line); what
    they leave out keeps DaemonConfig's default."""
    values = {name: build(settings) for name, build in BUILT.items()}
    values |= {name: _AS[TYPES[name]](settings[name]) for name in _plain() if settings.get(name) is not None}
    return DaemonConfig(**values)
