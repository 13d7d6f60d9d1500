# Where a client finds its IPUs and their daemon by default: inside
# `ipufs run` (and wherever else it is set), IPUFS_MOUNT names the mount
# and IPUFS_CONTROL its control socket (docs/compat.md); elsewhere the
# nodes are /dev's links (docs/client.md).
from __future__ import annotations

import os

MOUNT_ENV = "IPUFS_MOUNT"
CONTROL_ENV = "IPUFS_CONTROL"


def default_root() -> str:
    """The directory of the nodes: $IPUFS_MOUNT when set, else /dev."""
    return os.environ.get(MOUNT_ENV) or "/dev"


def default_control() -> str | None:
    """The control socket named by $IPUFS_CONTROL, or None."""
    return os.environ.get(CONTROL_ENV) or None
