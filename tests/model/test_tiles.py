# The seed's tile memory rules, table by table, on the model alone.
from __future__ import annotations

import mmap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipufs.model.memory import BarMemory
from ipufs.model.profile import PROFILES
from ipufs.model.tiles import Location, MisalignedAccess, NoMemory, TileMemory


def tiles(profile: str = "ipu1") -> TileMemory:
    p = PROFILES[profile]
    return TileMemory(p, BarMemory(memoryview(mmap.mmap(-1, p.exchange_size))))  # sparse: untouched pages cost nothing


# address -> (offset in SRAM, region, bank) on GC2: populated 0x40000..0x7FFFF,
# region 1 from bit 17, region 0 banks of 16 KiB, region 1 banks by bit 3.
GC2 = [
    (0x40000, 0x00000, 0, 0),
    (0x40008, 0x00008, 0, 0),
    (0x43FF8, 0x03FF8, 0, 0),
    (0x44000, 0x04000, 0, 1),
    (0x5C000, 0x1C000, 0, 7),
    (0x5FFFF, 0x1FFFF, 0, 7),
    (0x60000, 0x20000, 1, 0),
    (0x60008, 0x20008, 1, 1),
    (0x60010, 0x20010, 1, 0),
    (0x60018, 0x20018, 1, 1),
    (0x68000, 0x28000, 1, 2),
    (0x68008, 0x28008, 1, 3),
    (0x7FFF8, 0x3FFF8, 1, 7),
    # Invalid addresses alias by masking off bits 18 and up.
    (0x00010, 0x00010, 0, 0),
    (0x80010, 0x00010, 0, 0),
    (0x1C0010, 0x00010, 0, 0),
    (0x1FFFFF, 0x3FFFF, 1, 7),
    (0x220000, 0x20000, 1, 0),  # past 21 bits: the address bus drops it
]


@pytest.mark.parametrize("address,offset,region,bank", GC2, ids=[f"0x{a:x}" for a, *_ in GC2])
def test_gc2_address_table(address: int, offset: int, region: int, bank: int) -> None:
    assert tiles().locate(address) == Location(offset, region, bank)
    assert tiles().canonical(address) == 0x40000 + offset


ALIGNMENT = [
    (0x40000, 1, True), (0x40001, 1, True), (0x40001, 2, False), (0x40002, 2, True),
    (0x40002, 4, False), (0x40004, 4, True), (0x40004, 8, False), (0x40008, 8, True),
    (0x40008, 16, False), (0x40010, 16, True), (0x40003, 8, False),
]


@pytest.mark.parametrize("address,width,ok", ALIGNMENT)
def test_natural_alignment(address: int, width: int, ok: bool) -> None:
    t = tiles()
    if ok:
        t.check_alignment(address, width)
    else:
        with pytest.raises(MisalignedAccess):
            t.check_alignment(address, width)


def test_widths_other_than_powers_of_two_are_refused() -> None:
    with pytest.raises(ValueError):
        tiles().check_alignment(0x40000, 3)


def test_region_one_interleaving_allows_odd_word_pairs() -> None:
    t = tiles()
    assert not t.conflict(0x60000, 0x60008)  # an odd number of words apart: two banks
    assert t.conflict(0x60000, 0x60010)  # an even number: the same bank
    assert t.conflict(0x40000, 0x40008)  # region 0 is not interleaved
    assert not t.conflict(0x40000, 0x60000)  # different regions


@pytest.mark.parametrize("profile", ["ipu2", "ipu21"])
def test_gc200_memory_is_where_a_c600_has_it(profile: str) -> None:
    # osmarks/ipu-stack crates/ipu-target/src/memory.rs: 0x4c000 + 624 KiB,
    # executable below 0x80000, interleaved from there
    t = tiles(profile)
    assert (t.window, t.base, t.sram, t.region1) == (0x100000, 0x4C000, 624 * 1024, 0x80000)
    assert t.locate(0x4C000) == Location(0, 0, 0)
    assert (t.locate(0x7FFF8).region, t.locate(0x80000).region) == (0, 1)
    assert t.locate(0xE7FF8).offset == 0xE7FF8 - 0x4C000
    for outside in (0, 0x40000, 0x4BFFC, 0xE8000, 0x100000 + 0x4C000, 0x1FFFFF):
        with pytest.raises(NoMemory):
            t.locate(outside)
    with pytest.raises(NoMemory):
        t.read(0, 0xE8000, 4)


@given(st.integers(0, (1 << 21) - 1))
def test_every_address_lands_in_populated_memory_where_addresses_alias(address: int) -> None:
    t = tiles("ipu1")
    loc = t.locate(address)
    assert 0 <= loc.offset < t.sram and 0 <= loc.bank < 8 and loc.region in (0, 1)
    assert t.locate(t.canonical(address)) == loc


@given(st.integers(0x4C000, 0xE7FFF))
def test_every_gc200_address_lands_in_its_region(address: int) -> None:
    t = tiles("ipu2")
    loc = t.locate(address)
    assert loc.offset == address - 0x4C000 and loc.region == (address >= 0x80000) and 0 <= loc.bank < 8


def test_reads_and_writes_reach_the_tile_window_of_the_exchange_bar() -> None:
    t = tiles()
    t.write(1, 0x40010, b"\x01\x02\x03\x04")
    # ipu1: the windows start at 0x0c000000 (the public SOC_..._IPU_BASE), tile 1's 0x40000 after
    assert t.exchange.read(0x0C00_0000 + 0x40000 + 0x10, 4) == b"\x01\x02\x03\x04"
    assert t.window_start(1215) == 0x0C00_0000 + 1215 * 0x40000
    assert t.read(1, 0x80010, 4) == b"\x01\x02\x03\x04"  # an alias reads the same word
    with pytest.raises(MisalignedAccess):
        t.read(1, 0x40011, 4)
    with pytest.raises(IndexError):
        t.read(1216, 0x40000, 4)


def test_parity_marks_are_per_word_and_cleared_by_writes_and_clear() -> None:
    t = tiles()
    t.mark_bad_parity(0, 0x40013)
    assert t.bad_word(0, 0x40010, 8) and t.bad_word(0, 0x40014, 4)
    assert not t.bad_word(0, 0x40018, 8) and not t.bad_word(1, 0x40010, 8)
    assert t.bad_word(0, 0x80010, 8)  # through an alias too
    t.write(0, 0x40010, b"\0" * 8)
    assert not t.bad_word(0, 0x40010, 8)
    t.mark_bad_parity(0, 0x40020)
    t.clear()
    assert not t.bad_parity
