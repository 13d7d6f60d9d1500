# The loader's rules, without a device: which segments go where, and
# which are refused (outside populated memory, code outside region 0,
# another architecture, tiles that do not exist).
from __future__ import annotations

import pytest

from ipufs.abi import elf
from ipufs.client.loader import LoadError, Placement, TileMemoryMap, parse_tiles, plan

IPU1 = TileMemoryMap("ipu1", tiles=1216, sram=256 * 1024, base=0x40000, window=0x40000)
CODE = elf.PF_R | elf.PF_X
DATA = elf.PF_R | elf.PF_W


def _image(*segments: elf.Segment, arch: str | None = "ipu1") -> elf.ElfImage:
    return elf.ElfImage(arch, 0x40000, segments, (), ())


def test_segments_are_placed_at_their_offset_in_the_tile_window_zero_filled() -> None:
    got = plan(_image(elf.Segment(0x40000, b"\x01\x02\x03\x04", 4, CODE),
                      elf.Segment(0x70000, b"\xff", 8, DATA)), IPU1, [0, 1215])
    assert got == [Placement(0, b"\x01\x02\x03\x04"), Placement(0x30000, b"\xff" + bytes(7))]


@pytest.mark.parametrize("segment,problem", [
    (elf.Segment(0x3FFF0, bytes(32), 32, DATA), "outside populated tile memory 0x40000-0x80000"),
    (elf.Segment(0x7FFF0, bytes(32), 32, DATA), "outside populated tile memory"),
    (elf.Segment(0x90000, bytes(4), 4, DATA), "outside populated tile memory"),
    (elf.Segment(0x60000, bytes(4), 4, CODE), "code must lie in region 0 (0x40000-0x60000)"),
    (elf.Segment(0x5FFFC, bytes(8), 8, CODE), "code must lie in region 0"),
    (elf.Segment(0x40002, bytes(4), 4, CODE), "does not start on a 4-byte boundary"),
])
def test_segments_breaking_the_tile_memory_rules_are_refused(segment: elf.Segment, problem: str) -> None:
    with pytest.raises(LoadError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        plan(_image(elf.Segment(0x40000, bytes(4), 4, CODE), segment), IPU1, [0])


def test_data_may_lie_in_region_1() -> None:
    assert plan(_image(elf.Segment(0x60000, bytes(16), 16, DATA)), IPU1, [0]) == [Placement(0x20000, bytes(16))]


def test_other_architectures_tiles_and_empty_files_are_refused() -> None:
    seg = elf.Segment(0x40000, bytes(4), 4, CODE)
    with pytest.raises(LoadError, match="ipu2 code and this IPU is ipu1"):
        plan(_image(seg, arch="ipu2"), IPU1, [0])
    with pytest.raises(LoadError, match="tile 1216 does not exist"):
        plan(_image(seg), IPU1, [0, 1216])
    with pytest.raises(LoadError, match="no loadable segment"):
        plan(_image(), IPU1, [0])
    with pytest.raises(LoadError, match="overlaps"):
        plan(_image(seg, elf.Segment(0x40000, bytes(4), 4, DATA)), IPU1, [0])


def test_tile_lists() -> None:
    assert parse_tiles("0-3") == [0, 1, 2, 3]
    assert parse_tiles("0,2,5-6") == [0, 2, 5, 6]
    for bad in ("x", "5-2", "0-1216"):
        with pytest.raises(ValueError):
            parse_tiles(bad, 1216)


GC200 = TileMemoryMap("ipu21", tiles=1472, sram=624 * 1024, base=0x4C000, window=0x100000, code_end=0x80000)


def test_code_ends_where_the_device_says_executable_memory_ends() -> None:
    # The GC200 runs code below 0x80000, not in the first half of its SRAM
    # (which would end at 0x100000): TILE_CODE_END says so.
    code = elf.Segment(0x7FFF0, bytes(16), 16, CODE)
    assert plan(_image(code, arch="ipu21"), GC200, [0]) == [Placement(0x33FF0, bytes(16))]
    with pytest.raises(LoadError, match=r"code must lie in region 0 \(0x4c000-0x80000\)"):
        plan(_image(elf.Segment(0x80000, bytes(4), 4, CODE), arch="ipu21"), GC200, [0])
