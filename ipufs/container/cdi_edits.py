# What a container gets of a mount (binds.py's ContainerEdits), written in
# the form a CDI spec holds it (Container Device Interface 0.5.0:
# containerEdits with env and mounts), and the names CDI devices go by.
# Both the plain spec (cdi.py) and the spec whose devices follow daemon
# restarts (follow.py) are made of these.
from __future__ import annotations

from typing import Any

from ipufs.container.binds import ContainerEdits, Tmpfs

#: The options of a tmpfs mount, as an OCI runtime takes them.
TMPFS_OPTIONS = ("nosuid", "nodev", "noexec")


def device_name(prefix: str, index: int | str) -> str:
    """The CDI name of IPU ``index`` (or of "all") under ``prefix``."""
    return f"{prefix}-{index}" if prefix else str(index)


def tmpfs_mount(t: Tmpfs) -> dict[str, Any]:
    """A CDI mount of an empty tmpfs (hostPath is its source's name, which
    CDI requires and a tmpfs ignores)."""
    return {"hostPath": "tmpfs", "containerPath": t.target, "type": "tmpfs",
            "options": [*TMPFS_OPTIONS, f"mode={t.mode:o}"]}


def container_edits(edits: ContainerEdits) -> dict[str, Any]:
    """``edits`` as a CDI containerEdits object."""
    out: dict[str, Any] = {}
    if edits.env:
        out["env"] = [f"{key}={value}" for key, value in edits.env]
    mounts = [tmpfs_mount(t) for t in edits.tmpfs]
    mounts += [{"hostPath": b.source, "containerPath": b.target, "options": ["bind", "ro" if b.read_only else "rw"]}
               for b in edits.binds]
    if mounts:
        out["mounts"] = mounts
    return out
