from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipufs.driver.nodes import NodeTree
from ipufs.model.memory import BarMemory
from ipufs.model.profile import PROFILES, Region


@given(st.integers(0, 300), st.binary(max_size=80))
def test_writes_are_clipped_at_the_end_and_reads_agree(offset: int, data: bytes) -> None:
    mem = BarMemory(bytearray(256))
    n = mem.write(offset, data)
    assert n == max(0, min(len(data), 256 - offset))
    assert mem.read(offset, len(data)) == data[:n]
    assert mem.size == 256


def test_negative_offsets_are_refused() -> None:
    with pytest.raises(ValueError):
        BarMemory(bytearray(16)).read(-1, 4)


def test_dirty_ranges_are_recorded_only_when_tracking() -> None:
    mem = BarMemory(bytearray(64))
    mem.write(0, b"ab")
    assert mem.take_dirty() == []
    mem.track_dirty = True
    mem.write(8, b"cd")
    mem.write(60, b"toolong")
    assert mem.take_dirty() == [(8, 2), (60, 4)]
    assert mem.take_dirty() == []


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=list(PROFILES))
def test_exchange_bar_holds_every_tile_in_power_of_two_windows(profile) -> None:  # type: ignore[no-untyped-def]
    window = profile.tile_window
    assert window & (window - 1) == 0 and window >= profile.sram_per_tile
    assert profile.exchange_tile_base + profile.tiles * window <= profile.region_size(Region.EXCHANGE)
    assert profile.pci_vendor == 0x1D95
    assert all(profile.region_size(r) % 4096 == 0 for r in Region)


def test_ipu1_follows_the_public_exchange_and_tdi_constants() -> None:
    """research/ipu1/ipu1_consts.c: SOC_HOST_PCI_SPACE_ONE_PCI_CPLX_BAR_SIZE
    0x20000000, _IPU_BASE 0xc000000, _IPU_RANGE 0x14000000 (1280 windows
    of 0x40000: the GC2's tiles before repair), SOC_IPU_MEM_BASE 0x30000 and
    SOC_IPU_MEM_TILE_STRIDE 0x40."""
    p = PROFILES["ipu1"]
    assert (p.exchange_size, p.exchange_tile_base, p.tile_window) == (0x2000_0000, 0x0C00_0000, 0x40000)
    assert p.tile_instances * p.tile_window == 0x1400_0000 and p.tile_instances == 1280
    assert (p.tdi_tile_base, p.tdi_tile_span) == (0x30000, 1280 * 0x40)
    for other in ("ipu2", "ipu21"):
        q = PROFILES[other]
        assert (q.exchange_size, q.exchange_tile_base) == (q.tiles * q.tile_window, 0)


def test_the_gc200_follows_what_a_real_c600_shows() -> None:
    """osmarks/ipu-stack: the config BAR is mapped 0x80000 bytes, the TDI of
    physical tile P at 0x30000 + P x 0x40 (crates/ipu-driver/src/lib.rs);
    tile memory 0x4c000..0xe8000, code below 0x80000, region 1 from there
    (crates/ipu-target/src/memory.rs)."""
    for name in ("ipu2", "ipu21"):
        q = PROFILES[name]
        assert (q.config_size, q.tdi_tile_base, q.tdi_tile_span) == (0x80000, 0x30000, 1472 * 0x40)
        assert (q.tile_memory_base, q.tile_memory_base + q.sram_per_tile, q.region1_start) == (0x4C000, 0xE8000,
                                                                                              0x80000)
        assert not q.aliasing and not q.tile_map.identity
    assert PROFILES["ipu1"].aliasing and PROFILES["ipu1"].tile_map.identity


def test_a_profile_whose_layout_does_not_fit_is_refused() -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match="do not fit its exchange BAR"):
        replace(PROFILES["ipu1"], exchange_bar_size=0x1000_0000)
    with pytest.raises(ValueError, match="do not fit its config space"):
        replace(PROFILES["ipu1"], tdi_tile_base=0xF0000)


def test_profile_facts() -> None:
    assert (PROFILES["ipu1"].tiles, PROFILES["ipu1"].sram_per_tile) == (1216, 256 * 1024)
    assert (PROFILES["ipu2"].tiles, PROFILES["ipu2"].ipus_per_board) == (1472, 4)
    assert PROFILES["ipu21"].board_type == "C600" and PROFILES["ipu1"].pci_device == 1


@given(st.integers(1, 64), st.data())
def test_node_names_and_inodes_are_one_to_one(count: int, data: st.DataObject) -> None:
    tree = NodeTree(count)
    nodes = list(tree)
    assert len(nodes) == 4 * count == len({n.ino for n in nodes}) == len({n.name for n in nodes})
    node = data.draw(st.sampled_from(nodes))
    assert tree.by_name(node.name) == node == tree.by_ino(node.ino)
    assert tree.node(node.ipu, node.region) == node
    assert tree.by_ino(1) is None and tree.by_ino(2 + 4 * count) is None
