# Grafting files into directories of the host's that may not be written, in
# a private mount namespace (`ipufs run`, docs/compat.md): sysfs, where
# nothing can be created, and /run, which is the host's own. A directory
# that must gain an entry is covered by a tmpfs that first gets back all
# it held (each directory bound back whole, each file bound onto an empty
# file, each link copied), so that everything the host had stays where it
# was; then the new entry is bound, or linked, in. Nothing reaches the host:
# the mounts live and die with the namespace. The technique is build_dev's
# (namespace.py), one directory at a time.
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ipufs import native


def _bind(source: str, target: str, recursive: bool = False) -> None:
    native.mount(source, target, "", native.MS_BIND | (native.MS_REC if recursive else 0), "")


class Grafts:
    """Grafts into this mount namespace; ``staging`` is an empty directory
    where each covering tmpfs is filled before it is moved into place."""

    def __init__(self, staging: Path) -> None:
        self.staging = staging
        self.covered: set[Path] = set()  # directories of ours: tmpfs, or made in one

    def bind(self, source: Path, target: Path) -> None:
        """Show ``source`` (a file or directory) at ``target``, over
        whatever the host has there."""
        if not os.path.lexists(target):
            self.writable(target.parent)
            if source.is_dir():
                target.mkdir()
            else:
                target.touch()
        elif target.is_symlink():
            self.writable(target.parent)
            target.unlink()
            if source.is_dir():
                target.mkdir()
            else:
                target.touch()
        _bind(str(source), str(target))

    def link(self, text: str, target: Path) -> None:
        """Make ``target`` a symbolic link to ``text``."""
        self.writable(target.parent)
        if target.is_symlink():
            target.unlink()  # the host's, copied: ours replaces it
        os.symlink(text, target)

    def write(self, path: Path, content: str) -> None:
        """Make ``path`` a file of ours holding ``content``: one the host
        has there (bound back in) is set aside first, never written."""
        self.writable(path.parent)
        if os.path.lexists(path):
            while os.path.ismount(path):
                native.umount(str(path), native.MNT_DETACH)
            path.unlink()
        path.write_text(content)

    def writable(self, directory: Path) -> None:
        """Make ``directory`` one of ours, keeping what it holds."""
        if directory in self.covered:
            return
        if not os.path.lexists(directory):
            self.writable(directory.parent)
            directory.mkdir(mode=0o755)
        else:
            self._cover(directory)
        self.covered.add(directory)

    def _cover(self, directory: Path) -> None:
        native.mount("tmpfs", str(self.staging), "tmpfs", native.MS_NOSUID | native.MS_NODEV, "mode=0755")
        fill_like(self.staging, directory)
        native.mount(str(self.staging), str(directory), "", native.MS_MOVE, "")
        # Where the staging directory lies in what was covered (a run
        # directory in /run), the binds back hold a copy of its tmpfs there:
        # dropped, so that it is empty and free again.
        while os.path.ismount(self.staging):
            native.umount(str(self.staging), native.MNT_DETACH)


def fill_like(staging: Path, directory: Path, skip: Callable[[str], bool] = lambda name: False) -> None:
    """Give ``staging`` (an empty tmpfs) what ``directory`` holds, but the
    names ``skip`` says: directories bound whole, other files bound onto
    empty ones, links copied."""
    for entry in os.scandir(directory):
        if skip(entry.name):
            continue
        target = staging / entry.name
        try:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir():
                target.mkdir()
                _bind(entry.path, str(target), recursive=True)
            else:
                target.touch()
                _bind(entry.path, str(target))
        except OSError:
            continue  # gone meanwhile, or not ours to bind: left out
