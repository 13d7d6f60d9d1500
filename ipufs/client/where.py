# Where a client finds its IPUs and their daemon by default: inside
# `ipufs run` (and wherever else it is set), IPUFS_MOUNT names the mount
# and IPUFS_CONTROL its control socket (docs/compat.md); elsewhere the
# nodes are /dev's links (docs/client.md).
from __future__ import annotations

import os

MOUNT_ENV = "IPUFS_MOUNT"
CONTROL_ENV = "IPUFS_CONTROL"


def default_root() -> str:
    """The directory of the nodes: /dev when it holds the very nodes of
    $IPUFS_MOUNT (inside `ipufs run`, which binds them there: a client's
    files then read as /dev/ipuN in /proc and to lsof, as real devices
    do), else $IPUFS_MOUNT when set, else /dev."""
    mount = os.environ.get(MOUNT_ENV)
    if not mount:
        return "/dev"
    try:
        if os.path.samefile("/dev/ipu0", os.path.join(mount, "ipu0")):
            return "/dev"
    except OSError:
        pass
    return mount


def default_control() -> str | None:
    """The control socket named by $IPUFS_CONTROL, or None."""
    return os.environ.get(CONTROL_ENV) or None
