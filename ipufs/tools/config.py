# The daemon's configuration file (/etc/ipufs/ipufs.toml): the same settings
# as `ipufs mount`'s options. Options given on the command line win.
from __future__ import annotations

import grp
import os
import pwd
import tomllib
from pathlib import Path
from typing import Any

from ipufs.driver.daemon import DaemonConfig
from ipufs.driver.filesystem import Ownership

DEFAULT_FILE = "/etc/ipufs/ipufs.toml"
KEYS = {"mountpoint", "ipus", "profile", "owner", "group", "mode", "state_dir", "passthrough",
        "link_dev", "dev_dir", "group_size", "control", "fault_plan", "trace_file", "trace_max_bytes",
        "spin_us"}


def uid_of(value: str | int) -> int:
    return value if isinstance(value, int) else int(value) if value.isdigit() else pwd.getpwnam(value).pw_uid


def gid_of(value: str | int) -> int:
    return value if isinstance(value, int) else int(value) if value.isdigit() else grp.getgrnam(value).gr_gid


def mode_of(value: str | int) -> int:
    return value if isinstance(value, int) else int(value, 8)


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    settings = data.get("ipufs", data)
    unknown = set(settings) - KEYS
    if unknown:
        raise ValueError(f"{path}: unknown settings {', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
    return dict(settings)


def daemon_config(settings: dict[str, Any]) -> DaemonConfig:
    """A DaemonConfig from merged settings (file, then command line)."""
    s = settings
    return DaemonConfig(
        mountpoint=os.path.abspath(s.get("mountpoint", "/run/ipufs")),
        ipus=int(s.get("ipus", 4)),
        profile=str(s.get("profile", "ipu2")),
        ownership=Ownership(uid=uid_of(s.get("owner", 0)), gid=gid_of(s.get("group", 0)),
                            mode=mode_of(s.get("mode", 0o660))),
        passthrough=bool(s.get("passthrough", True)),
        state_dir=Path(s["state_dir"]).resolve() if s.get("state_dir") else None,
        group_size=int(s["group_size"]) if s.get("group_size") else None,
        control=s.get("control"),
        link_dev=bool(s.get("link_dev", os.geteuid() == 0)),
        dev_dir=str(s.get("dev_dir", "/dev")),
        fault_plan=s.get("fault_plan"),
        trace_file=s.get("trace_file"),
        trace_max_bytes=int(s.get("trace_max_bytes", 64 << 20)),
        spin_us=int(s.get("spin_us", DaemonConfig.spin_us)),
    )
