# Device profiles: what kind of IPU is emulated, as data. Facts from public
# sources (tile counts, SRAM, workers: research/ipu1/ipu1_consts.c of
# github.com/Saghetti0/graphcore-ipu-research and Graphcore's product
# documentation; PCI ids: the pci.ids database; the GC200's config BAR,
# tile memory and tile numbering as a runtime that drives a real C600
# observed them: osmarks/ipu-stack, crates/ipu-driver/src/lib.rs and
# crates/ipu-target/src/memory.rs, topology.rs); BAR sizes are ipufs's own
# choice where the real ones are not public. docs/profiles.md and
# docs/registers.md say which is which.
from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ipufs.abi.registers import TDI_TILE_STRIDE
from ipufs.model.tile_map import TileMap, c600_map, identity_map

KiB = 1024
MiB = 1024 * KiB


class Region(enum.Enum):
    """The four PCIe memory regions of an IPU, one device node each."""

    CONFIG = "config"  # ipuN: config space BAR (registers, TDI, ICU doorbells)
    EXCHANGE = "exchange"  # ipuN_ex: exchange space BAR (tile memory windows)
    MAILBOX = "mailbox"  # ipuN_mailbox: ICU mailbox
    HOST_MEMORY = "host_memory"  # ipuN_mem: host exchange ("continuous") memory


def _pow2_at_least(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class Profile:
    name: str
    arch: str  # ipu1, ipu2, ipu21
    chip: str
    pci_vendor: int
    pci_device: int
    board_type: str
    ipus_per_board: int
    tiles: int
    sram_per_tile: int
    workers_per_tile: int
    link_speed: str
    link_width: int
    clock_mhz: int
    power_mw: int
    config_size: int = 1 * MiB
    mailbox_size: int = 64 * KiB
    host_memory_size: int = 64 * MiB
    #: the exchange BAR's size; None: tiles x tile window (ipufs's layout)
    exchange_bar_size: int | None = None
    #: where tile 0's window starts in the exchange BAR (tile T's is at
    #: exchange_tile_base + T x tile_window: logical tile T is instance T)
    exchange_tile_base: int = 0
    #: where tile 0's per-tile TDI registers start in config space (physical
    #: tile P's register R at + P x TDI_TILE_STRIDE + R x TDI_REGISTER_WIDTH);
    #: None: the profile has none, only the TDI aperture
    tdi_tile_base: int | None = None
    #: the tile address of SRAM's first byte; None: the tile window, and any
    #: 21-bit address aliases onto SRAM (the GC2's rule, tiles.py)
    memory_base: int | None = None
    #: the tile address where region 1 (interleaved, not executable)
    #: starts; None: half way through SRAM
    region1_base: int | None = None
    #: logical tile -> physical tile ("identity" or "c600": tile_map.py)
    tile_numbering: str = "identity"

    def __post_init__(self) -> None:
        if self.exchange_tile_base + self.tile_instances * self.tile_window > self.exchange_size \
                or self.tile_instances < self.tiles:
            raise ValueError(f"profile {self.name}: the tiles' windows do not fit its exchange BAR")
        if self.tdi_tile_base is not None and self.tdi_tile_base + self.tdi_tile_span > self.config_size:
            raise ValueError(f"profile {self.name}: the per-tile TDI registers do not fit its config space")

    @property
    def aliasing(self) -> bool:
        """Whether any 21-bit tile address aliases onto SRAM (the GC2's
        rule); otherwise only [memory base, + SRAM) is memory."""
        return self.memory_base is None

    @property
    def tile_memory_base(self) -> int:
        """The tile address of SRAM's first byte."""
        return self.tile_window if self.memory_base is None else self.memory_base

    @property
    def region1_start(self) -> int:
        """The tile address where region 1 starts: code runs below it."""
        return self.tile_memory_base + self.sram_per_tile // 2 if self.region1_base is None else self.region1_base

    @cached_property
    def tile_map(self) -> TileMap:
        """Logical and physical tile numbers (the per-tile TDI and the
        exchange use physical ones, everything else logical)."""
        return c600_map(self.tiles) if self.tile_numbering == "c600" else identity_map(self.tiles)

    @property
    def link_speed_tenths(self) -> int:
        """The link speed in 0.1 GT/s (the LINK_SPEED register)."""
        return round(float(self.link_speed.split()[0]) * 10)

    @property
    def tile_window(self) -> int:
        """Stride of one tile's window in the exchange BAR: the SRAM size
        rounded up to a power of two, so tile = offset >> log2(window)."""
        return _pow2_at_least(self.sram_per_tile)

    @property
    def exchange_size(self) -> int:
        return self.exchange_bar_size if self.exchange_bar_size is not None else self.tiles * self.tile_window

    @property
    def tile_instances(self) -> int:
        """Tile windows the exchange BAR has room for from exchange_tile_base
        (ipu1: 1280, the tiles of a GC2 before repair; the others: tiles)."""
        if self.exchange_bar_size is None:
            return self.tiles
        return (self.exchange_bar_size - self.exchange_tile_base) // self.tile_window

    @property
    def tdi_tile_span(self) -> int:
        """Bytes of config space the per-tile TDI registers take: one
        TDI_TILE_STRIDE per tile instance (0 without them)."""
        return 0 if self.tdi_tile_base is None else self.tile_instances * TDI_TILE_STRIDE

    def region_size(self, region: Region) -> int:
        return {
            Region.CONFIG: self.config_size,
            Region.EXCHANGE: self.exchange_size,
            Region.MAILBOX: self.mailbox_size,
            Region.HOST_MEMORY: self.host_memory_size,
        }[region]


GRAPHCORE = 0x1D95
#: the GC200 as a C600 shows it (osmarks/ipu-stack): a config BAR of 0x80000
#: bytes with the per-tile TDI at 0x30000 (crates/ipu-driver/src/lib.rs),
#: tile memory 0x4c000..0xe8000 with region 1 from 0x80000 (crates/
#: ipu-target/src/memory.rs), tiles numbered as topology.rs maps them
_GC200: dict[str, Any] = dict(config_size=0x80000, tdi_tile_base=0x30000, memory_base=0x4C000,
                                 region1_base=0x80000, tile_numbering="c600")

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="ipu1", arch="ipu1", chip="Colossus GC2", pci_vendor=GRAPHCORE,
            pci_device=0x0001, board_type="C2", ipus_per_board=2, tiles=1216,
            sram_per_tile=256 * KiB, workers_per_tile=6, link_speed="8 GT/s", link_width=16,
            clock_mhz=1600, power_mw=75_000,
            # research/ipu1/ipu1_consts.c: SOC_HOST_PCI_SPACE_ONE_PCI_CPLX_BAR_SIZE,
            # _IPU_BASE (tile memory from there, _IPU_RANGE = 1280 windows of
            # 0x40000) and SOC_IPU_MEM_BASE (the tiles' registers in config
            # space, SOC_IPU_MEM_TILE_STRIDE apart): docs/registers.md
            exchange_bar_size=0x2000_0000, exchange_tile_base=0x0C00_0000, tdi_tile_base=0x30000,
        ),
        Profile(
            # The IPU-M2000 reaches its host over RDMA, not PCIe, so no PCI
            # device id is public: 0x0004 is ipufs's own. Its GC200 is the
            # C600's chip: the same config BAR, tile memory and numbering.
            name="ipu2", arch="ipu2", chip="Colossus GC200", pci_vendor=GRAPHCORE,
            pci_device=0x0004, board_type="M2000", ipus_per_board=4, tiles=1472,
            sram_per_tile=624 * KiB, workers_per_tile=6, link_speed="16.0 GT/s", link_width=16,
            clock_mhz=1330, power_mw=150_000, **_GC200,
        ),
        Profile(
            name="ipu21", arch="ipu21", chip="Colossus GC200 (C600)", pci_vendor=GRAPHCORE,
            pci_device=0x0003, board_type="C600", ipus_per_board=1, tiles=1472,
            sram_per_tile=624 * KiB, workers_per_tile=6, link_speed="16.0 GT/s", link_width=16,
            clock_mhz=1500, power_mw=185_000, **_GC200,
        ),
    )
}

DEFAULT_PROFILE = "ipu2"
