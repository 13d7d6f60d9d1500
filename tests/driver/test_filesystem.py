# The ipufs filesystem driven in memory through a fake kernel: the node
# tree, attributes, the fixed-tree errors, BAR bounds, xattrs, open modes.
from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Iterator

import pytest

from ipufs.driver.devices import DeviceSet
from ipufs.driver.filesystem import IpuFilesystem
from ipufs.driver.nodes import Ownership
from ipufs.driver.nodes import NodeTree
from ipufs.fuse import abi
from ipufs.fuse import replies as rp
from ipufs.fuse import requests as rq
from ipufs.fuse.session import Session
from ipufs.model.profile import PROFILES, Region
from tests.driver.rig import Rig, StubKernel
from tests.fuse import fakekernel as fk


@pytest.fixture
def devices() -> Iterator[DeviceSet]:
    ds = DeviceSet(PROFILES["ipu1"], 2)
    yield ds
    ds.close()


def make(devices: DeviceSet, *, passthrough: bool = True, fail: int | None = None,
         ownership: Ownership | None = None) -> tuple[IpuFilesystem, fk.FakeKernel, StubKernel]:
    rig = Rig(devices, passthrough=passthrough, fail=fail, ownership=ownership)
    return rig.fs, rig.kernel, rig.stub


def entry_attr(payload: bytes, offset: int = 40) -> dict[str, int]:
    ino, size, _, _, _, _, _, _, _, mode, nlink, uid, gid, _, _, _ = abi.ATTR.unpack_from(payload, offset)
    return {"ino": ino, "size": size, "mode": mode, "nlink": nlink, "uid": uid, "gid": gid}


def test_lookup_gives_every_node_with_profile_sizes(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices, ownership=Ownership(uid=7, gid=8, mode=0o640))
    p = PROFILES["ipu1"]
    for name, size in [("ipu0", p.config_size), ("ipu1_ex", 0x2000_0000),  # the public size of a GC2's exchange BAR
                       ("ipu0_mailbox", p.mailbox_size), ("ipu1_mem", p.host_memory_size)]:
        reply = kernel.call(rq.Lookup, 1, name.encode())
        assert reply.error == 0, name
        attr = entry_attr(reply.payload)
        assert attr["size"] == size
        assert attr["mode"] == stat.S_IFREG | 0o640
        assert (attr["uid"], attr["gid"], attr["nlink"]) == (7, 8, 1)


@pytest.mark.parametrize("name", [b"ipu2", b"ipu01", b"ipu0_x", b"IPU0", b"", b"\xff", b"ipu0_ex_"])
def test_lookup_of_a_missing_name_is_enoent(devices: DeviceSet, name: bytes) -> None:
    _, kernel, _ = make(devices)
    assert kernel.call(rq.Lookup, 1, name).error == errno.ENOENT


def test_readdir_lists_the_nodes_in_driver_order_then_the_sysfs_view(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    reply = kernel.call(rq.Readdir, 1, 0, 0, 4096, False)
    names, pos = [], 0
    while pos < len(reply.payload):
        _, _, namelen, _ = abi.DIRENT_HEAD.unpack_from(reply.payload, pos)
        names.append(reply.payload[pos + 24 : pos + 24 + namelen].decode())
        pos += abi.dirent_size(namelen)
    assert names == [".", "..", *[n.name for n in NodeTree(2)], "sys"]
    # Resuming at an offset continues after that entry.
    again = kernel.call(rq.Readdir, 1, 0, 3, 4096, False)
    assert again.payload == reply.payload[abi.dirent_size(1) + abi.dirent_size(2) + abi.dirent_size(4):]


@pytest.mark.parametrize("cls,args", [
    (rq.Create, (b"new", os.O_RDWR, 0o644, 0)),
    (rq.Mknod, (b"new", stat.S_IFREG | 0o644, 0, 0)),
    (rq.Mkdir, (b"d", 0o755, 0)),
    (rq.Unlink, (b"ipu0",)),
    (rq.Rmdir, (b"ipu0",)),
    (rq.Rename, (b"ipu0", 1, b"ipu9", 0)),
    (rq.Link, (2, b"ipu9")),
    (rq.Symlink, (b"l", b"ipu0")),
])
def test_the_tree_is_fixed(devices: DeviceSet, cls: type[rq.Request], args: tuple[object, ...]) -> None:
    _, kernel, _ = make(devices)
    assert kernel.call(cls, 1, *args).error == errno.EPERM


def test_size_is_fixed_but_mode_owner_and_times_may_change(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    V = abi.SetattrValid
    assert kernel.call(rq.Setattr, 2, int(V.SIZE), 0, 0, 0, 0, 0, 0, 0, 0).error == errno.EPERM
    same = PROFILES["ipu1"].config_size
    assert kernel.call(rq.Setattr, 2, int(V.SIZE), 0, same, 0, 0, 0, 0, 0, 0).error == 0
    reply = kernel.call(rq.Setattr, 2, int(V.MODE | V.UID | V.GID), 0, 0, 0, 0, 0, 0o6600, 5, 6)
    assert reply.error == 0
    attr = entry_attr(reply.payload, 16)
    assert (attr["mode"], attr["uid"], attr["gid"]) == (stat.S_IFREG | 0o600, 5, 6)


def test_open_with_truncate_is_refused(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    assert kernel.call(rq.Open, 2, os.O_RDWR | os.O_TRUNC).error == errno.EPERM


def open_flags(reply: fk.Reply) -> tuple[int, int, int]:
    fh, flags, backing = abi.OPEN_OUT.unpack_from(reply.payload)
    return fh, flags, backing


def test_passthrough_opens_register_each_backing_file_once(devices: DeviceSet) -> None:
    fs, kernel, stub = make(devices)
    O = abi.OpenFlag
    tree = fs.tree
    config = tree.node(0, Region.CONFIG).ino
    exchange = tree.node(0, Region.EXCHANGE).ino
    _, f1, b1 = open_flags(kernel.call(rq.Open, config, os.O_RDWR))
    _, f2, b2 = open_flags(kernel.call(rq.Open, config, os.O_RDWR))
    _, f3, b3 = open_flags(kernel.call(rq.Open, exchange, os.O_RDWR))
    assert f1 == f2 == O.NOFLUSH | O.DIRECT_IO | O.PASSTHROUGH and b1 == b2 == 1
    assert f3 == O.NOFLUSH | O.PASSTHROUGH and b3 == 2
    assert stub.registered == [devices.backing[0, Region.CONFIG].fd, devices.backing[0, Region.EXCHANGE].fd]
    assert fs.mode == "passthrough"


def test_a_refused_backing_file_falls_back_to_the_page_cache(devices: DeviceSet) -> None:
    fs, kernel, _ = make(devices, fail=errno.EPERM)
    _, flags, backing = open_flags(kernel.call(rq.Open, 3, os.O_RDWR))
    assert (flags, backing) == (abi.OpenFlag.NOFLUSH, 0)
    assert fs.mode == "page-cache" and "CAP_SYS_ADMIN" in fs.mode_reason


def test_config_reads_and_writes_reach_the_model(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    fh, _, _ = open_flags(kernel.call(rq.Open, 2, os.O_RDWR))
    scratch = 0x10C  # the SCRATCH register
    assert kernel.call(rq.Write, 2, fh, scratch, memoryview(b"\xde\xad\xbe\xef"), 0, 0).payload[:4] == b"\x04\0\0\0"
    assert devices.ipus[0].read_config(scratch, 4) == b"\xde\xad\xbe\xef"
    devices.ipus[0].write_config(0x8000, b"\x01\x02")
    assert kernel.call(rq.Read, 2, fh, 0x8000, 2, 0).payload == b"\x01\x02"
    # A read-only register keeps its value whatever the host writes.
    kernel.call(rq.Write, 2, fh, 0, memoryview(b"\0\0\0\0"), 0, 0)
    assert kernel.call(rq.Read, 2, fh, 0, 4, 0).payload == (0x1D95).to_bytes(4, "little")


def test_bar_bounds(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    size = PROFILES["ipu1"].config_size
    fh, _, _ = open_flags(kernel.call(rq.Open, 2, os.O_RDWR))
    assert kernel.call(rq.Read, 2, fh, size, 100, 0).payload == b""
    assert len(kernel.call(rq.Read, 2, fh, size - 10, 100, 0).payload) == 10
    assert kernel.call(rq.Write, 2, fh, size, memoryview(b"x"), 0, 0).error == errno.EPERM
    short = kernel.call(rq.Write, 2, fh, size - 2, memoryview(b"abcd"), 0, 0)
    assert struct.unpack_from("<I", short.payload)[0] == 2
    assert devices.ipus[0].read_config(size - 2, 2) == b"ab"


def test_page_cache_mode_publishes_model_writes(devices: DeviceSet) -> None:
    fs, kernel, stub = make(devices, passthrough=False)
    assert fs.mode == "page-cache"
    devices.ipus[1].memory[Region.HOST_MEMORY].write(4096, b"data")
    fs.mapping.publish()
    ino = fs.tree.node(1, Region.HOST_MEMORY).ino
    assert stub.notes == [rp.notify_store(ino, 4096, b"data")]
    devices.ipus[1].memory[Region.EXCHANGE].clear()
    fs.mapping.publish()
    assert stub.notes[-1] == rp.notify_inval_inode(fs.tree.node(1, Region.EXCHANGE).ino, 0, 0)


def test_xattrs_describe_the_mount_and_are_read_only(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    names = kernel.call(rq.Listxattr, 1, 4096).payload.split(b"\0")
    assert b"user.ipufs.mode" in names and b"user.ipufs.profile" in names
    assert kernel.call(rq.Getxattr, 1, b"user.ipufs.profile", 100).payload == b"ipu1"
    size = struct.unpack_from("<I", kernel.call(rq.Getxattr, 1, b"user.ipufs.profile", 0).payload)[0]
    assert size == 4
    assert kernel.call(rq.Getxattr, 1, b"user.ipufs.profile", 2).error == errno.ERANGE
    assert kernel.call(rq.Getxattr, 1, b"user.other", 100).error == errno.ENODATA
    assert kernel.call(rq.Getxattr, 3, b"user.ipufs.region", 100).payload == b"exchange"
    assert kernel.call(rq.Setxattr, 1, b"user.x", b"1", 0).error == errno.EPERM
    assert kernel.call(rq.Removexattr, 1, b"user.ipufs.mode").error == errno.EPERM


def test_lookup_counts_are_returned_by_forget(devices: DeviceSet) -> None:
    fs, kernel, _ = make(devices)
    for _ in range(3):
        kernel.call(rq.Lookup, 1, b"ipu0")
    assert fs.stats.lookups == {2: 3}
    kernel.send(rq.Forget(0, 2, kernel.ctx, 2))
    assert fs.stats.lookups == {2: 1}
    kernel.send(rq.BatchForget(0, 0, kernel.ctx, ((2, 1),)))
    assert fs.stats.lookups == {}


def test_ioctls_are_not_known_yet(devices: DeviceSet) -> None:
    _, kernel, _ = make(devices)
    fh, _, _ = open_flags(kernel.call(rq.Open, 2, os.O_RDWR))
    assert kernel.call(rq.Ioctl, 2, fh, 0, 0x1234, 0, memoryview(b""), 0).error == errno.ENOTTY
    assert kernel.call(rq.Ioctl, 2, 999, 0, 0x1234, 0, memoryview(b""), 0).error == errno.EBADF
