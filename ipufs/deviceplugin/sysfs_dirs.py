# The directory a container sees at /sys/bus/pci/devices when kubelet gives
# it IPUs by bind mounts. A device plugin's answer can hold bind mounts
# only, no tmpfs (api.proto's Mount; the CRI's too), so the empty
# /sys/bus/pci/devices that binds.shared_edits asks for is a host directory:
# one per set of IPUs, holding an empty directory per IPU named by its PCI
# address, onto which the runtime binds that IPU's directory of the sysfs
# view (binds.ipu_edits). Its listing is then exactly the container's IPUs,
# as aspen-sdk's discovery needs (docs/kubernetes.md).
#
# The directories are made once per set and kept: a running container's
# bind holds its own, and the sets a node's placement gives are few.
# Beside them goes a copy of the compatibility library, for kubelet binds
# host paths and a plugin in a pod has its own in its image: this
# directory is one the host shares at the same path.
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ipufs import compat
from ipufs.abi.pci import pci_address

#: The directories' place in the plugin's socket directory, which a plugin
#: in a pod shares with the host at the same path anyway.
DIR_NAME = "ipufs-sysfs"
DEFAULT_SYSFS_DIR = Path("/var/lib/kubelet/device-plugins") / DIR_NAME


def set_name(ipus: Iterable[int]) -> str:
    """The directory name of a set of IPUs: "2-3" for IPUs 2 and 3."""
    return "-".join(str(i) for i in sorted(set(ipus)))


class SysfsDirs:
    """Per-set directories under ``base`` (a path the host and the plugin
    share: kubelet hands it to the runtime as a host path)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def for_ipus(self, ipus: Iterable[int]) -> Path:
        """The directory for ``ipus``, made if missing or not as it should
        be (made whole under another name, then renamed into place)."""
        ipus = sorted(set(ipus))
        path = self.base / set_name(ipus)
        wanted = {pci_address(i) for i in ipus}
        try:
            if set(os.listdir(path)) == wanted:
                return path
        except FileNotFoundError:
            pass
        self.base.mkdir(parents=True, exist_ok=True)
        made = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=self.base))
        try:
            made.chmod(0o755)
            for address in wanted:
                (made / address).mkdir(mode=0o755)
            if path.exists():
                shutil.rmtree(path)
            os.rename(made, path)
        except OSError:
            shutil.rmtree(made, ignore_errors=True)
            if not (path.is_dir() and set(os.listdir(path)) == wanted):  # another Allocate made it first
                raise
        return path

    def library(self) -> Path:
        """A copy of the installed compatibility library in ``base``, made
        again when the installed one changes (a new file: containers that
        bound the old one keep it)."""
        installed = compat.library_path()
        copy = self.base / compat.LIBRARY_NAME
        content = installed.read_bytes()
        try:
            if copy.read_bytes() == content:
                return copy
        except FileNotFoundError:
            pass
        self.base.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{copy.name}.", dir=self.base)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            os.chmod(temporary, 0o755)
            os.replace(temporary, copy)
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            raise
        return copy
