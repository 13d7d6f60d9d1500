# python_floor: the Python yardstick for ipufs's control path. The least a
# Python FUSE server can do per request: one file, "ipu0", and a loop that
# reads a request, answers every IOCTL at once (zeroed output, result 0)
# with two struct operations and a write, and leaves everything else
# (INIT, LOOKUP, GETATTR, OPEN...) to ipufs's session. One thread, blocking
# reads, no spin: the C server's shape in Python. benchmarks/run.py measures
# the same clients against it, against the C server and against ipufs.
#
# A second file, "mem", is a bare passthrough file: opened with a memfd as
# its backing file, as ipufs opens ipuN_mem, so that its reads and writes
# never reach this loop. It measures what the kernel's passthrough path
# costs whatever the server.
#
# Run: python benchmarks/python_floor.py MOUNTPOINT   (as root; stops when
# unmounted)
from __future__ import annotations

import errno
import os
import stat
import struct
import sys

from ipufs.fuse import abi
from ipufs.fuse import mount as fmount
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.channel import FuseChannel
from ipufs.fuse.errors import FUSEError
from ipufs.fuse.operations import Operations
from ipufs.fuse.session import Session

ROOT = rp.Attr(ino=1, mode=stat.S_IFDIR | 0o755, nlink=2)
FILES = {
    b"ipu0": rp.Attr(ino=2, mode=stat.S_IFREG | 0o666, size=1 << 20),
    b"mem": rp.Attr(ino=3, mode=stat.S_IFREG | 0o666, size=64 << 20),
}
BY_INO = {attr.ino: attr for attr in FILES.values()}


class TwoFiles(Operations):
    def __init__(self, channel: FuseChannel) -> None:
        self.channel = channel
        self.memfd = os.memfd_create("python-floor-mem")
        os.ftruncate(self.memfd, FILES[b"mem"].size)
        self.backing_id = 0

    def lookup(self, req: rq.Lookup) -> rp.Reply:
        if req.nodeid != 1 or req.name not in FILES:
            raise FUSEError(errno.ENOENT)
        return rp.Entry(FILES[req.name])

    def getattr(self, req: rq.Getattr) -> rp.Reply:
        return rp.AttrReply(ROOT if req.nodeid == 1 else BY_INO[req.nodeid])

    def open(self, req: rq.Open) -> rp.Reply:
        if req.nodeid == FILES[b"mem"].ino:
            if not self.backing_id:  # once the connection has negotiated passthrough
                self.backing_id = self.channel.backing_open(self.memfd)
            return rp.Opened(0, abi.OpenFlag.PASSTHROUGH, self.backing_id)
        return rp.Opened(0, abi.OpenFlag.DIRECT_IO)

    def release(self, req: rq.Release) -> rp.Reply:
        return rp.Empty()


def main() -> int:
    mountpoint = sys.argv[1]
    channel = FuseChannel.open()
    session = Session(TwoFiles(channel), passthrough=True)
    fmount.mount(channel.fd, mountpoint)
    print("ready", flush=True)
    fd = channel.fd
    buffer = bytearray(session.buffer_size)
    view = memoryview(buffer)
    out_header, ioctl_out = abi.OUT_HEADER, abi.IOCTL_OUT
    out_size_at = abi.IN_HEADER.size + abi.IOCTL_IN.size - 4
    zeros = bytes(4096)
    while True:
        try:
            n = os.readv(fd, [buffer])
        except OSError as exc:
            if exc.errno in (errno.EINTR, errno.ENOENT):
                continue
            return 0  # unmounted
        _, opcode, unique = struct.unpack_from("<IIQ", buffer)
        if opcode == abi.Opcode.IOCTL:
            (out_size,) = struct.unpack_from("<I", buffer, out_size_at)
            body = ioctl_out.pack(0, 0, 0, 0) + zeros[:out_size]
            reply: bytes | None = out_header.pack(out_header.size + len(body), 0, unique) + body
        else:
            reply = session.handle(view[:n])
        if reply is not None:
            try:
                os.write(fd, reply)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main())
