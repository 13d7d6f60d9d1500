# What a command-line user is told when something fails: one line naming
# the problem and, where there is one, the fix, with an exit status
# (docs/tools.md, "Exit status"). Errors raised below the CLI (OSError from
# a system call, a daemon's refusal, an exception group from trio) are
# translated here, once, so that no Python repr or traceback reaches a user.
from __future__ import annotations

import errno
import os
import shutil

#: Exit statuses (docs/tools.md).
OK = 0
FAILED = 1  # the operation could not be done: no devices, daemon gone, permission, device error
USAGE = 2  # bad command line or configuration (argparse uses 2 too)
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports it
BROKEN_PIPE = 141  # the reader of our output went away (128 + SIGPIPE), as for other Unix tools


class Problem(Exception):
    """A failure explained for a user: ``what`` went wrong and the ``fix``."""

    def __init__(self, what: str, fix: str | None = None, status: int = FAILED) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix
        self.status = status

    def line(self) -> str:
        return f"{self.what}: {self.fix}" if self.fix else self.what


def as_root(command: str) -> str:
    """The advice to run ``command`` as root: sudo's form too where sudo is
    installed (a root shell without it has no use for that)."""
    return f"run `{command}` as root" + (f" (`sudo {command}`)" if shutil.which("sudo") else "")


class BrokenPipe(Exception):
    """Our output's reader went away: exit quietly with BROKEN_PIPE."""


def _mountpoint_of(path: str) -> str:
    """The dead mount ``path`` lives in (a node, the mount point itself,
    or a link to either): the highest directory on the way up that still
    fails with ENOTCONN, since statfs asks the daemon of the mount it
    lands in; ``path`` itself when none does. Names say nothing: a mount
    point may well be called ``ipu`` like a node."""
    found = real = os.path.realpath(path)  # the link is read in a live directory; the dead part is kept
    current = real
    while True:
        try:
            os.statvfs(current)
            if current != real:
                return found  # the first live directory above the dead mount
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:
                found = current
        parent = os.path.dirname(current)
        if parent == current:
            return found
        current = parent


def from_os_error(exc: OSError) -> Problem | BrokenPipe:
    """An OSError as a user should read it, with errno-specific advice."""
    name = exc.filename
    where = f" ({name})" if name else ""
    code = exc.errno
    reason = exc.strerror or (os.strerror(code) if code else str(exc))
    if code == errno.EPIPE:
        return BrokenPipe()
    if code == errno.ENOTCONN:
        mountpoint = _mountpoint_of(str(name)) if name else "MOUNTPOINT"
        return Problem(f"the ipufs daemon behind {mountpoint} is gone",
                       f"clear the dead mount with `ipufs umount {mountpoint}`, then mount again")
    if code == errno.ECONNREFUSED:
        return Problem(f"nobody answers on the control socket{where}: the daemon is gone",
                       "clear its mount with `ipufs umount MOUNTPOINT`, then mount again")
    if code in (errno.EACCES, errno.EPERM):
        return Problem(f"permission denied{where}",
                       "run as root, or as a member of the nodes' group (`ls -l` on the nodes shows it)")
    if code == errno.ENOENT:
        return Problem(f"{name} does not exist" if name else reason)
    if code == errno.EBUSY:
        return Problem(f"device or resource busy{where}",
                       "another process holds it; `ipufs monitor` shows who")
    if code == errno.ETIMEDOUT:
        return Problem(f"timed out{where}", "the daemon or the device did not answer in time")
    return Problem(f"{reason}{where}")


def explain(exc: BaseException) -> Problem | BrokenPipe:
    """Any exception as a Problem (or a quiet BrokenPipe). Exception
    groups are unwrapped; every leaf's message is kept."""
    if isinstance(exc, (Problem, BrokenPipe)):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        leaves = [explain(e) for e in exc.exceptions]
        if any(isinstance(leaf, BrokenPipe) for leaf in leaves):
            return BrokenPipe()
        problems = [leaf for leaf in leaves if isinstance(leaf, Problem)]
        first = problems[0]
        if len(problems) == 1:
            return first
        return Problem("; ".join(p.line() for p in problems), status=first.status)
    if isinstance(exc, BrokenPipeError):
        return BrokenPipe()
    if isinstance(exc, OSError):
        return from_os_error(exc)
    if isinstance(exc, KeyboardInterrupt):
        return Problem("interrupted", status=INTERRUPTED)
    text = str(exc) or type(exc).__name__
    if isinstance(exc, (ValueError, RuntimeError)):  # ours, and the daemon's refusals: already sentences
        return Problem(text)
    return Problem(f"unexpected {type(exc).__name__}: {text}",
                   "this is a bug in ipufs: run again with -v for the details, and report it")
