# Finding the emulated IPUs a tool should look at, and reading what each
# says about itself through its nodes: config registers by pread, the ICU
# through the mailbox ioctl, and the daemon's control channel for what only
# the daemon knows (who is attached, signal counts).
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import cast

from ipufs.client import Control, ControlError, IoctlError
from ipufs.client.device import icu_transfer
from ipufs.client.where import MOUNT_ENV
from ipufs.abi.icu import ERROR_MARKER, op_word
from ipufs.abi.ipu_view import IpuView
from ipufs.abi.registers import REGISTERS
from ipufs.problems import Problem, as_root


def root(dev: str | None) -> Path:
    """Where the nodes are: ``dev`` when given (a tool's --dev), else
    default_root()."""
    return Path(dev) if dev else default_root()


def default_root() -> Path:
    """Where the nodes are: $IPUFS_MOUNT when set (inside `ipufs run`),
    else /dev when /dev/ipu0 exists, else /run/ipufs."""
    mount = os.environ.get(MOUNT_ENV)
    if mount:
        return Path(mount)
    return Path("/dev") if os.path.exists("/dev/ipu0") else Path("/run/ipufs")


def _no_devices(root: Path, why: str) -> Problem:
    return Problem(f"no IPUs in {root} ({why})",
                   "mount some: " + as_root("ipufs mount") + " (docs/quickstart.md), or name the nodes' directory "
                   "with --dev DIR")


def indices(root: Path) -> list[int]:
    """The ids N of the ``ipuN`` nodes in ``root``; a Problem when none."""
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        raise _no_devices(root, "it does not exist") from None
    except NotADirectoryError:
        raise _no_devices(root, "it is not a directory") from None
    found = {int(e[3:]) for e in entries if e.startswith("ipu") and e[3:].isdigit()}
    if not found:
        raise _no_devices(root, "no ipuN nodes there")
    return sorted(found)


def mountpoint_of(root: Path, index: int) -> str:
    return os.path.dirname(os.path.realpath(root / f"ipu{index}"))


def control_of(root: Path, timeout: float = 5.0) -> Control:
    """The control channel of the daemon serving the IPUs in ``root``
    (the one helper `inject` and `trace` share)."""
    mountpoint = mountpoint_of(root, indices(root)[0])
    try:
        return Control.of_mount(mountpoint, timeout)
    except OSError as exc:
        if exc.errno == errno.ENODATA:
            raise Problem(f"{mountpoint} names no control socket: it is not an ipufs mount",
                          "name the nodes of an ipufs mount with --dev DIR") from None
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            raise Problem(f"the control socket of {mountpoint} does not answer: the daemon is gone",
                          f"clear the mount with `ipufs umount {mountpoint}`, then mount again") from None
        raise


def registers(root: Path, index: int) -> dict[str, int]:
    fd = os.open(root / f"ipu{index}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.pread(fd, 0x600, 0)
    finally:
        os.close(fd)
    return {name: int.from_bytes(data[r.offset : r.offset + 4], "little")
            for name, r in REGISTERS.items() if r.offset + 4 <= len(data)}


def icu(root: Path, index: int, *requests: tuple[int, ...]) -> list[tuple[int, ...] | None]:
    """The ICU's answers to ``requests`` (each a query and its arguments),
    made in turn on one read-only open of IPU ``index`` (so they are
    answered while another process holds the IPU, docs/filesystem.md);
    None for a request it refuses or does not answer (ETIMEDOUT: an ICU
    timeout, docs/faults.md)."""
    fd = os.open(root / f"ipu{index}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return [_icu_answer(fd, op, *args) for op, *args in requests]
    finally:
        os.close(fd)


def _icu_answer(fd: int, op: int, *args: int) -> tuple[int, ...] | None:
    try:
        answer = icu_transfer(fd, (op_word(op), *args, *([0] * (4 - len(args)))))
    except IoctlError as exc:
        if exc.errno == errno.ETIMEDOUT:
            return None
        raise
    return None if answer[0] == ERROR_MARKER else answer


def daemon_view(root: Path, index: int) -> IpuView | None:
    """The control channel's view of one IPU, or None when unreachable. The
    attached process's pid is as this process sees it (the daemon numbers
    it in our PID namespace; null, with a ``pid_note``, when we cannot see
    it: docs/control.md)."""
    try:
        with Control.of_mount(mountpoint_of(root, index), timeout=2) as control:
            view = cast(IpuView, control.request("ipu", ipu=index))
    except (OSError, ControlError, ValueError):
        return None
    return seen_here(view)


def daemon_views(root: Path, timeout: float | None = None) -> dict[int, IpuView]:
    """Every IPU's view from one `status` request to the daemon serving
    ``root`` (pids as daemon_view gives them). Raises OSError when there is
    no daemon to ask, ControlError when it refuses, ControlTimeout when it
    does not answer within ``timeout`` (Control.TIMEOUT unless told)."""
    with Control.of_mount(mountpoint_of(root, indices(root)[0]), timeout) as control:
        answer = control.request("status")
    views = cast(list[IpuView], answer["ipus"])
    return {view["ipu"]: seen_here(view) for view in views}


def seen_here(view: IpuView) -> IpuView:
    """``view`` with the attached pid as this process sees it: the daemon
    numbers it so already, in the asker's PID namespace (null, with a
    ``pid_note``, when this process cannot see it)."""
    return view
