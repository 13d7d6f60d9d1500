# The sysfs view's side of the filesystem (ipufs/driver/sysfs.py): its
# entries' attributes, its links, and its open files: attribute files
# only, read-only as sysfs makes a file without a store method (even for
# root: EACCES), and read straight from the model at each read, since
# their values are live; config space whole for root alone, as the kernel
# gives it whole to CAP_SYS_ADMIN alone (docs/sysfs.md). The router
# (filesystem.py) hands each request on whose inode or file handle is the
# view's.
from __future__ import annotations

import errno
import os

from ipufs.driver import sysfs
from ipufs.driver.devices import DeviceSet
from ipufs.driver.nodes import Entry, Kind, NodeTree
from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.errors import FUSEError


class SysfsView:
    """The view's entries, and its open attribute files by file handle."""

    def __init__(self, devices: DeviceSet, tree: NodeTree) -> None:
        self.devices = devices
        self.tree = tree
        self.open_files: dict[int, Entry] = {}

    def __contains__(self, fh: int) -> bool:
        return fh in self.open_files

    def open(self, req: rq.Open, fh: int) -> rp.Opened:
        """Open the view's entry ``req.nodeid`` as file handle ``fh``."""
        entry = self.tree.entry(req.nodeid)
        if entry.kind is not Kind.ATTRIBUTE:
            raise FUSEError(errno.EISDIR if entry.kind is Kind.DIRECTORY else errno.ELOOP)
        if req.flags & os.O_ACCMODE != os.O_RDONLY or req.flags & os.O_TRUNC:
            raise FUSEError(errno.EACCES, "sysfs attributes are read-only")
        self.open_files[fh] = entry
        return rp.Opened(fh, abi.OpenFlag.DIRECT_IO)

    def read(self, req: rq.Read) -> rp.Data:
        entry = self.open_files.get(req.fh)
        if entry is None:
            raise FUSEError(errno.EBADF)
        try:
            # The kernel gives all of config space to CAP_SYS_ADMIN alone;
            # the uid the request carries (in the mount's user namespace)
            # stands for it: root's reads get it whole.
            value = sysfs.read(self.devices.ipus[entry.ipu], entry.table, entry.name, req.ctx.uid == 0)
        except OSError as exc:
            raise FUSEError(exc.errno or errno.EIO, str(exc.strerror)) from None
        return rp.Data(value[req.offset : req.offset + req.size])

    def close(self, fh: int) -> None:
        self.open_files.pop(fh, None)

    def nlink_and_size(self, entry: Entry) -> tuple[int, int]:
        """A directory's 2 links; a link's target length; an attribute's
        sysfs size (4096), whatever its value now."""
        if entry.kind is Kind.DIRECTORY:
            return 2, 0
        if entry.kind is Kind.LINK:
            return 1, len(entry.target)
        return 1, sysfs.size(self.devices.profile, entry.table, entry.name)

    def readlink(self, entry: Entry) -> rp.Data:
        if entry.kind is not Kind.LINK:
            raise FUSEError(errno.EINVAL)
        return rp.Data(entry.target.encode())
