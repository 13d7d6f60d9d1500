# `ipufs cdi-hook LINK=TARGET...`: the CDI createContainer hook of devices
# that follow daemon restarts (follow.py). The OCI runtime spec runs a
# createContainer hook in the container's mount namespace after its mounts
# and before pivot_root, with the container's state (JSON, holding "bundle")
# on stdin; the bundle's config.json names the root ("root.path", relative to
# the bundle unless absolute). The hook makes each LINK (a path in the
# container: /dev/ipuN... or /sys/bus/pci/devices/ADDRESS) a symbolic link to
# TARGET and does nothing else; anything wrong fails it with one line on
# stderr and status 1, which makes the runtime refuse the container.
#
# The root path is resolved once, and everything below it is reached
# relative to descriptors (openat with O_NOFOLLOW, symlinkat): a path
# checked and then used again could be swapped for a symbolic link in
# between, and the link would land outside the container.
from __future__ import annotations

import errno
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


def open_root(root: str) -> int:
    """The container's root, opened once (a directory descriptor): links
    in the path the runtime gave are the host's own and are followed."""
    try:
        return os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise HookError(f"cannot open the container's root {root}: {exc.strerror}") from None


def make_link(root: int, link: str, target: str) -> None:
    """Make ``link`` (a path in the container whose root directory is
    open as ``root``) point to ``target``. Its directory must be one of
    ALLOWED, reached from the root one name at a time without following
    a symbolic link (O_NOFOLLOW), and the link is made relative to it, so
    nothing done to the container's tree meanwhile can put it elsewhere."""
    names = link.split("/")[1:]
    if not link.startswith(ALLOWED) or any(n in ("", ".", "..") for n in names) or not target.startswith("/"):
        raise HookError(f"refusing to link {link} to {target}: links go in {' or '.join(ALLOWED)}")
    directory = os.dup(root)
    try:
        for name in names[:-1]:
            try:
                inner = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise HookError(f"refusing to link {link}: {name} is a symbolic link (or not a directory) "
                                    "in the container") from None
                raise HookError(f"cannot link {link} to {target}: {exc.strerror}") from None
            os.close(directory)
            directory = inner
        try:
            os.symlink(target, names[-1], dir_fd=directory)
        except OSError as exc:
            raise HookError(f"cannot link {link} to {target}: {exc.strerror}") from None
    finally:
        os.close(directory)


def main(links: list[str], stdin: TextIO = sys.stdin) -> int:
    """Make every LINK=TARGET of ``links`` in the container whose state
    is on ``stdin``; 0, or 1 with one line on stderr."""
    try:
        pairs = [pair.split("=", 1) for pair in links]
        if not pairs or any(len(p) != 2 for p in pairs):
            raise HookError("usage: ipufs cdi-hook LINK=TARGET... (run by a container runtime, "
                            "with the container's state on stdin)")
        root = open_root(container_root(stdin.read()))
        try:
            for link, target in pairs:
                make_link(root, link, target)
        finally:
            os.close(root)
    except HookError as exc:
        print(f"ipufs cdi-hook: {exc}", file=sys.stderr)
        return 1
    return 0
