# An IPU as the PCI bus shows it: its four memory BARs and its
# configuration space, the bytes `lspci -x` and hwloc read from the sysfs
# view's `config` file.
#
# Facts: Graphcore's answer (the forum, seed 003) that `lspci -v` shows four
# memory regions per IPU, one per device node (config space, exchange space,
# ICU mailbox, host exchange memory); the public constants of the research
# repository github.com/Saghetti0/graphcore-ipu-research: the exchange space
# is BAR 2, the MSI-X table lies in BAR 4 and its pending-bit array (PBA) in
# BAR 5. BAR 4 and BAR 5 can then only be 32-bit BARs (a 64-bit BAR takes
# two slots). Layouts follow the PCI Local Bus 3.0 type-0 header and the
# PCI Express Base 4.0 capability structure. What no source tells (addresses,
# which of the mailbox and host memory is BAR 4, the vector count, the
# revision, the IRQ) is ipufs's own, in docs/sysfs.md.
from __future__ import annotations

import struct
from dataclasses import dataclass

from ipufs.abi import registers as R
from ipufs.model.ipu import Ipu
from ipufs.model.profile import Profile, Region

#: The kernel's class code of a processing accelerator (PCI class 0x12).
PCI_CLASS = 0x120000
#: The revision ID ipufs gives every IPU (ours).
REVISION = 0x01
#: MSI-X vectors: the chip's six named sources, then reserved and ICU ones
#: (ghidra/constants.txt); how many in all is ours.
MSIX_VECTORS = 16
#: Size of the whole configuration space of a PCI Express function, and
#: what a reader without CAP_SYS_ADMIN gets of it from the kernel.
CONFIG_SIZE = 4096
UNPRIVILEGED_CONFIG_SIZE = 64

# struct resource flags the kernel prints in `resource`: IORESOURCE_MEM |
# _SIZEALIGN, plus _MEM_64 and the BAR's type bits (64-bit; prefetchable).
_MEM32 = 0x40200
_MEM64 = 0x140204
_MEM64_PREFETCH = 0x14220C
#: 64-bit BARs: each IPU owns a 64 GiB window from 256 GiB up.
_WINDOW64 = 1 << 36
_BASE64 = 1 << 38
#: 32-bit BARs: BAR 5 in slots of the window 0x80000000-0xf7ffffff, BAR 4
#: in the 128 MiB above it; addresses repeat once the slots run out (15 and
#: 1024 IPUs with the profiles' sizes): 32 bits hold no more.
_BASE32 = 0x8000_0000
_BASE32_SMALL = 0xF800_0000
_TOP32 = 1 << 32

CAP_PCIE = 0x40
CAP_MSIX = 0x80
#: The BARs of the MSI-X table and of its pending-bit array (the facts).
MSIX_TABLE_BAR = 4
MSIX_PBA_BAR = 5


@dataclass(frozen=True, slots=True)
class Bar:
    """One memory BAR: which region (node) it holds, and where."""

    number: int
    region: Region
    start: int
    size: int  # a power of two, as PCI wants
    flags: int

    @property
    def end(self) -> int:
        return self.start + self.size - 1

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & 0x4)

    @property
    def register_bits(self) -> int:
        """The low bits of the BAR register: memory, 64-bit, prefetchable."""
        return self.flags & 0xF


def _pow2_at_least(n: int) -> int:
    return 1 << (n - 1).bit_length()


def msix_table_offset(profile: Profile) -> int:
    """Where the MSI-X table sits in BAR 4: past the mailbox node, so that
    a client mapping the node never reaches it."""
    return _pow2_at_least(profile.region_size(Region.MAILBOX))


def msix_pba_offset(profile: Profile) -> int:
    """Where the PBA sits in BAR 5: past the host memory node."""
    return _pow2_at_least(profile.region_size(Region.HOST_MEMORY))


def bars(profile: Profile, index: int) -> list[Bar]:
    """IPU ``index``'s BARs, in BAR order: 0 config space (64-bit), 2
    exchange space (64-bit, prefetchable), 4 ICU mailbox and the MSI-X
    table (32-bit), 5 host exchange memory and the PBA (32-bit)."""
    config = _pow2_at_least(profile.region_size(Region.CONFIG))
    exchange = _pow2_at_least(profile.region_size(Region.EXCHANGE))
    base = _BASE64 + index * _WINDOW64
    exchange_start = (base + config + exchange - 1) // exchange * exchange
    mailbox = _pow2_at_least(msix_table_offset(profile) + 16 * MSIX_VECTORS)
    host = _pow2_at_least(msix_pba_offset(profile) + 8 * ((MSIX_VECTORS + 63) // 64))
    return [
        Bar(0, Region.CONFIG, base, config, _MEM64),
        Bar(2, Region.EXCHANGE, exchange_start, exchange, _MEM64_PREFETCH),
        Bar(MSIX_TABLE_BAR, Region.MAILBOX,
            _BASE32_SMALL + index % ((_TOP32 - _BASE32_SMALL) // mailbox) * mailbox, mailbox, _MEM32),
        Bar(MSIX_PBA_BAR, Region.HOST_MEMORY,
            _BASE32 + index % ((_BASE32_SMALL - _BASE32) // host) * host, host, _MEM32),
    ]


def register_value(ipu: Ipu, name: str) -> int:
    """The value config space register ``name`` holds now."""
    return int(ipu.config.words[R.REGISTERS[name].index])


def speed_code(tenths: int) -> int:
    """PCIe's link speed encoding: 1 = 2.5 GT/s, 2 = 5, 3 = 8, 4 = 16, 5 = 32."""
    return {25: 1, 50: 2, 80: 3, 160: 4, 320: 5}.get(tenths, 0)


def irq(index: int) -> int:
    """The IRQ the view reports for IPU ``index`` (ours)."""
    return 32 + index


def config_space(ipu: Ipu) -> bytes:
    """IPU ``ipu``'s whole configuration space (4096 bytes) now: the
    type-0 header from its registers and BARs, a PCI Express capability at
    0x40 with its link as the LINK_SPEED and LINK_WIDTH registers say, an
    MSI-X capability at 0x80, no extended capabilities."""
    space = bytearray(CONFIG_SIZE)
    vendor = register_value(ipu, "VENDOR_ID")
    command = 0x0006  # memory space, bus master
    status = 0x0010  # a capabilities list
    struct.pack_into("<HHHHI", space, 0x00, vendor, register_value(ipu, "DEVICE_ID"), command, status,
                     REVISION | PCI_CLASS << 8)
    for bar in bars(ipu.profile, ipu.index):
        offset = 0x10 + 4 * bar.number
        if bar.is_64bit:
            struct.pack_into("<II", space, offset, (bar.start & 0xFFFF_FFFF) | bar.register_bits, bar.start >> 32)
        else:
            struct.pack_into("<I", space, offset, bar.start | bar.register_bits)
    struct.pack_into("<HH", space, 0x2C, vendor, register_value(ipu, "BOARD_TYPE"))
    space[0x34] = CAP_PCIE
    space[0x3C] = irq(ipu.index) & 0xFF
    space[0x3D] = 1  # INTA#
    _pcie_capability(space, ipu)
    _msix_capability(space, ipu.profile)
    return bytes(space)


def _pcie_capability(space: bytearray, ipu: Ipu) -> None:
    max_speed = speed_code(ipu.profile.link_speed_tenths)
    width = ipu.profile.link_width
    if ipu.link_down:
        current_speed, current_width = 0, 0
    else:
        current_speed, current_width = speed_code(register_value(ipu, "LINK_SPEED")), register_value(ipu, "LINK_WIDTH")
    c = CAP_PCIE
    space[c], space[c + 1] = 0x10, CAP_MSIX
    struct.pack_into("<H", space, c + 0x02, 0x0002)  # version 2, an endpoint
    struct.pack_into("<I", space, c + 0x04, 0x0000_8001)  # DevCap: MaxPayload 256, role-based errors
    struct.pack_into("<H", space, c + 0x08, 0x2010)  # DevCtl: relaxed ordering, MaxReadReq 512
    struct.pack_into("<I", space, c + 0x0C, max_speed | width << 4)  # LnkCap, port 0
    struct.pack_into("<H", space, c + 0x12, current_speed | current_width << 4)  # LnkSta
    struct.pack_into("<I", space, c + 0x2C, ((1 << max_speed) - 1) << 1)  # LnkCap2: speeds up to max
    struct.pack_into("<H", space, c + 0x30, max_speed)  # LnkCtl2: target speed


def _msix_capability(space: bytearray, profile: Profile) -> None:
    c = CAP_MSIX
    space[c], space[c + 1] = 0x11, 0  # the last capability
    struct.pack_into("<H", space, c + 0x02, 0x8000 | (MSIX_VECTORS - 1))  # enabled, table size
    # Table and PBA: offset in the BAR, the BAR number (BIR) in the low 3 bits.
    struct.pack_into("<II", space, c + 0x04, msix_table_offset(profile) | MSIX_TABLE_BAR,
                     msix_pba_offset(profile) | MSIX_PBA_BAR)
