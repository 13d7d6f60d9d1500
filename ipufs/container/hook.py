# `ipufs cdi-hook LINK=TARGET...`: the CDI createContainer hook of devices
# that follow daemon restarts (follow.py). The OCI runtime spec runs a
# createContainer hook in the container's mount namespace after its mounts
# and before pivot_root, with the container's state (JSON, holding "bundle")
# on stdin; the bundle's config.json names the root ("root.path", relative to
# the bundle unless absolute). The hook makes each LINK (a path in the
# container: /dev/ipuN... or /sys/bus/pci/devices/ADDRESS) a symbolic link to
# TARGET and does nothing else; anything wrong fails it with one line on
# stderr and status 1, which makes the runtime refuse the container.
from __future__ import annotations

import json
import os
import sys
from typing import TextIO

#: The only directories the hook makes links in.
ALLOWED = ("/dev/", "/sys/bus/pci/devices/")


class HookError(Exception):
    """Why the hook refused: one line for the runtime's error."""


def container_root(state_text: str) -> str:
    """The container's root as the host sees it, from the OCI state."""
    try:
        state = json.loads(state_text)
        bundle = state["bundle"]
        with open(os.path.join(bundle, "config.json")) as f:
            root = json.load(f)["root"]["path"]
    except (ValueError, KeyError, TypeError) as exc:
        raise HookError(f"the container state on stdin names no bundle with a root ({exc!r})") from None
    except OSError as exc:
        raise HookError(f"cannot read the bundle's config.json: {exc.strerror}") from None
    return os.path.join(str(bundle), str(root))


def make_link(root: str, link: str, target: str) -> None:
    """Make ``link`` (a path in the container) point to ``target``; its
    directory must be one of ALLOWED, inside the root (no link out of it)."""
    if not link.startswith(ALLOWED) or "/.." in link or not target.startswith("/"):
        raise HookError(f"refusing to link {link} to {target}: links go in {' or '.join(ALLOWED)}")
    parent = os.path.dirname(root.rstrip("/") + link)
    if os.path.realpath(parent) != os.path.normpath(parent):
        raise HookError(f"refusing to link {link}: its directory is a symbolic link in the container")
    try:
        os.symlink(target, root.rstrip("/") + link)
    except OSError as exc:
        raise HookError(f"cannot link {link} to {target}: {exc.strerror}") from None


def main(links: list[str], stdin: TextIO = sys.stdin) -> int:
    """Make every LINK=TARGET of ``links`` in the container whose state
    is on ``stdin``; 0, or 1 with one line on stderr."""
    try:
        pairs = [pair.split("=", 1) for pair in links]
        if not pairs or any(len(p) != 2 for p in pairs):
            raise HookError("usage: ipufs cdi-hook LINK=TARGET... (run by a container runtime, "
                            "with the container's state on stdin)")
        root = container_root(stdin.read())
        for link, target in pairs:
            make_link(root, link, target)
    except HookError as exc:
        print(f"ipufs cdi-hook: {exc}", file=sys.stderr)
        return 1
    return 0
