# The configuration space and BARs of an IPU (ipufs/driver/pci_config.py):
# one golden table of bytes, read back as lspci reads them, and the view's
# binary attributes through the filesystem (whole for root, 64 bytes for
# others; resourceN unreadable).
from __future__ import annotations

import errno
import struct
from collections.abc import Iterator

import pytest

from ipufs.driver import pci_config as pci
from ipufs.driver.devices import DeviceSet
from ipufs.fuse import requests as rq
from ipufs.model.profile import PROFILES, Region
from tests.driver.rig import Rig

#: IPU 1 of an ipu1 (C2) mount, 0x00-0x8f: the header, PCIe at 0x40, MSI-X
#: at 0x80; all zero after.
GOLDEN = bytes.fromhex(
    "951d0100 06001000 01000012 00000000"  # ids, command, status, rev 01, class 12 00 00
    "04000000 50000000 0c000020 50000000"  # BAR 0 (64-bit), BAR 2 (64-bit, prefetchable)
    "000002f8 00000088 00000000 951d0100"  # BAR 4, BAR 5 (32-bit), subsystem 1d95:0001
    "00000000 40000000 00000000 21010000"  # capabilities at 0x40, IRQ 33, pin A
    "10800200 01800000 10200000 03010000"  # PCIe v2 endpoint; LnkCap 8 GT/s x16
    "00000301 00000000 00000000 00000000"  # LnkSta 8 GT/s x16
    "00000000 00000000 00000000 0e000000"  # LnkCap2: 2.5, 5, 8 GT/s
    "03000000 00000000 00000000 00000000"  # LnkCtl2: target 8 GT/s
    "11000f80 04000100 05000004 00000000"  # MSI-X on, 16 vectors, table BAR 4 +64K, PBA BAR 5 +64M
)


@pytest.fixture
def devices() -> Iterator[DeviceSet]:
    ds = DeviceSet(PROFILES["ipu1"], 2)
    yield ds
    ds.close()


def test_golden_config_space(devices: DeviceSet) -> None:
    space = pci.config_space(devices.ipus[1])
    assert len(space) == pci.CONFIG_SIZE
    assert space[: len(GOLDEN)] == GOLDEN and not any(space[len(GOLDEN):])


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_bars_hold_their_nodes_and_agree_with_the_header(profile: str) -> None:
    ds = DeviceSet(PROFILES[profile], 3)
    try:
        for ipu in ds.ipus:
            space = pci.config_space(ipu)
            bars = pci.bars(ipu.profile, ipu.index)
            assert [b.number for b in bars] == [0, 2, pci.MSIX_TABLE_BAR, pci.MSIX_PBA_BAR]
            assert [b.region for b in bars] == [Region.CONFIG, Region.EXCHANGE, Region.MAILBOX,
                                                Region.HOST_MEMORY]
            for bar in bars:
                assert bar.size & (bar.size - 1) == 0 and bar.start % bar.size == 0
                assert bar.size >= ipu.profile.region_size(bar.region)
                low, high = struct.unpack_from("<II", space, 0x10 + 4 * bar.number)
                address = (low & ~0xF) | (high << 32 if bar.is_64bit else 0)
                assert address == bar.start
                assert bar.is_64bit or bar.end < 1 << 32
            # The MSI-X structures lie past the nodes in their BARs.
            table, pba = struct.unpack_from("<II", space, pci.CAP_MSIX + 4)
            assert table & 7 == 4 and pba & 7 == 5
            assert ipu.profile.mailbox_size <= table & ~7 < bars[2].size
            assert ipu.profile.host_memory_size <= pba & ~7 < bars[3].size
    finally:
        ds.close()


def test_the_link_follows_the_model(devices: DeviceSet) -> None:
    ipu = devices.ipus[0]
    ipu.set_link(False)
    status = struct.unpack_from("<H", pci.config_space(ipu), pci.CAP_PCIE + 0x12)[0]
    assert status == 0  # down: no speed, width x0
    ipu.set_link(True)
    status = struct.unpack_from("<H", pci.config_space(ipu), pci.CAP_PCIE + 0x12)[0]
    assert status == 3 | 16 << 4


def _lookup(rig: Rig, path: str) -> int:
    nodeid = 1
    for name in path.split("/"):
        reply = rig.kernel.call(rq.Lookup, nodeid, name.encode())
        assert reply.error == 0, (path, name)
        nodeid = struct.unpack_from("<Q", reply.payload, 0)[0]
    return nodeid


def test_config_is_whole_for_root_and_64_bytes_for_others(devices: DeviceSet) -> None:
    rig = Rig(devices)
    config = _lookup(rig, "sys/devices/pci0000:1b/0000:1b:00.0/config")
    fh = struct.unpack_from("<Q", rig.kernel.call(rq.Open, config, 0).payload, 0)[0]
    whole = rig.kernel.call(rq.Read, config, fh, 0, 4096, 0).payload
    assert bytes(whole) == pci.config_space(devices.ipus[1])
    user = rq.Context(1000, 1000, 4242)
    assert bytes(rig.kernel.call(rq.Read, config, fh, 0, 4096, 0, ctx=user).payload) == whole[:64]
    assert bytes(rig.kernel.call(rq.Read, config, fh, 64, 64, 0, ctx=user).payload) == b""


def test_resource_files_are_sized_as_their_bars_and_not_readable(devices: DeviceSet) -> None:
    rig = Rig(devices)
    for bar in pci.bars(devices.profile, 0):
        nodeid = _lookup(rig, f"sys/devices/pci0000:1a/0000:1a:00.0/resource{bar.number}")
        size = struct.unpack_from("<Q", rig.kernel.call(rq.Getattr, nodeid, None).payload, 24)[0]
        assert size == bar.size
        fh = struct.unpack_from("<Q", rig.kernel.call(rq.Open, nodeid, 0).payload, 0)[0]
        assert rig.kernel.call(rq.Read, nodeid, fh, 0, 4096, 0).error == errno.EIO
