# The working directory of `ipufs run`: $XDG_RUNTIME_DIR/ipufs-run-PID-XXXX
# (or the same in $TMPDIR, /tmp), holding the mount point, the control
# socket and the daemon's log. A run whose supervisor was killed leaves its
# directory behind; the next run removes it.
#
# That base directory may be shared (/tmp), and other users can put
# anything there, such as a symbolic link named like one of ours pointing
# at a directory of theirs or of root's. So removal never follows a link
# and never trusts a name twice: it opens the base once, opens each entry
# relative to it with O_NOFOLLOW | O_DIRECTORY, checks that the directory
# it opened is this user's, and removes what is inside relative to that
# descriptor (unlinkat, and rmdir of subdirectories opened the same way),
# never entering a mount (one below is left, so its directory stays).
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

PREFIX = "ipufs-run-"
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RunDirError(OSError):
    """The working directory could not be made; the message says where."""


def base() -> str:
    """Where working directories go: $XDG_RUNTIME_DIR, else the temporary
    directory ($TMPDIR, /tmp)."""
    return os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()


def owner_pid(name: str) -> int | None:
    """The supervisor's PID in a working directory's name, or None."""
    if not name.startswith(PREFIX):
        return None
    pid = name[len(PREFIX):].split("-")[0]
    return int(pid) if pid.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def create() -> Path:
    """A fresh working directory (mode 0700), after removing those of
    supervisors that are gone. RunDirError when the base is unusable."""
    where = base()
    try:
        clear_stale(where)
        return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=where))
    except OSError as exc:
        variable = "XDG_RUNTIME_DIR" if os.environ.get("XDG_RUNTIME_DIR") else "TMPDIR"
        raise RunDirError(exc.errno, f"cannot make a working directory in {where} (${variable}): "
                          f"{exc.strerror}") from exc


def clear_stale(where: str) -> None:
    """Remove this user's working directories in ``where`` whose
    supervisor is gone."""
    fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in os.listdir(fd):
            pid = owner_pid(name)
            if pid is not None and pid != os.getpid() and not _alive(pid):
                try:
                    remove_at(fd, name)
                except OSError:
                    continue  # one we cannot remove does not stop this run
    finally:
        os.close(fd)


def remove(path: Path) -> bool:
    """Remove working directory ``path`` and what it holds (see
    remove_at); its parent is opened once, following links as given."""
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return remove_at(fd, path.name)
    finally:
        os.close(fd)


def remove_at(parent: int, name: str) -> bool:
    """Remove directory ``name`` of directory descriptor ``parent`` with
    everything below it, if it is a directory (not a link to one) of this
    user. Returns whether it is gone."""
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError:
        return False  # a link (ELOOP, ENOTDIR), not a directory, or gone
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return False
        _empty(fd, _mount_id(fd))
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=parent)
    except OSError:
        return False
    return True


def _mount_id(fd: int) -> int:
    """The mount a descriptor's file is on (its fdinfo's mnt_id): binds of
    the same filesystem differ here, where st_dev is the same."""
    with open(f"/proc/self/fdinfo/{fd}") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("mnt_id:"))


def _empty(fd: int, mount: int) -> None:
    """Remove what directory ``fd`` (on mount ``mount``) holds, relative
    to it; a subdirectory that is a mount point is left, unwalked."""
    for name in os.listdir(fd):
        try:
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(found.st_mode):
                os.unlink(name, dir_fd=fd)
                continue
            sub = os.open(name, _DIRECTORY, dir_fd=fd)
            try:
                opened = os.fstat(sub)
                if (opened.st_dev, opened.st_ino) != (found.st_dev, found.st_ino) or _mount_id(sub) != mount:
                    continue  # replaced meanwhile, or a mount point: leave it
                _empty(sub, mount)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=fd)
        except OSError:
            continue  # gone, a mount point, replaced: what stays keeps the directory
