# elf32-colossus files: what the writer makes, the reader reads back, and
# what the reader refuses (other machines, truncation), one line each.
from __future__ import annotations

import struct

import pytest

from ipufs.abi import elf

TEXT = elf.Section(".text", 0x40000, bytes(range(16)), elf.SHF_ALLOC | elf.SHF_EXECINSTR)
DATA = elf.Section(".data", 0x50000, b"\x01\x02\x03", elf.SHF_ALLOC | elf.SHF_WRITE)
SYMBOLS = [elf.Symbol("_start", 0x40000, ".text", True), elf.Symbol("table", 0x50000, ".data")]


def test_written_files_read_back_with_their_sections_segments_and_symbols() -> None:
    image = elf.read_elf(elf.write_elf("ipu2", 0x40000, [TEXT, DATA], SYMBOLS))
    assert image.arch == "ipu2" and image.entry == 0x40000
    assert [(s.name, s.address, s.data, s.executable) for s in image.sections] == [
        (".text", 0x40000, TEXT.data, True), (".data", 0x50000, DATA.data, False)]
    assert [(s.address, s.data, s.executable) for s in image.segments] == [
        (0x40000, TEXT.data, True), (0x50000, DATA.data, False)]
    assert sorted((s.name, s.value, s.section, s.bound_global) for s in image.symbols) == [
        ("_start", 0x40000, ".text", True), ("table", 0x50000, ".data", False)]


def test_the_header_names_graphcores_machine_and_the_architecture() -> None:
    data = elf.write_elf("ipu21", 0, [TEXT], [])
    ident, e_type, machine, _v, _entry, _ph, _sh, flags = struct.unpack_from("<16sHHIIIII", data)
    assert ident[:7] == b"\x7fELF\x01\x01\x01"  # 32-bit, little-endian, version 1
    assert (e_type, machine, flags) == (elf.ET_EXEC, 248, 0x21)


def _x86_64_header() -> bytes:
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    return ident + struct.pack("<HHI", 2, 62, 1) + bytes(48)


@pytest.mark.parametrize("data,problem", [
    (b"hello world", "not an ELF file"),
    (_x86_64_header(), "not elf32-colossus: an ELF for x86-64 (e_machine 62, want 248)"),
    (b"\x7fELF\x01\x01\x01", "truncated: the ELF header"),
    (elf.write_elf("ipu1", 0, [TEXT], [])[:100], "truncated: segment 0"),
])
def test_bad_files_are_refused_in_one_line(data: bytes, problem: str) -> None:
    with pytest.raises(elf.ElfError) as caught:
        elf.read_elf(data)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


_EHDR = struct.Struct("<16sHHIIIIIHHHHHH")
_PHDR = struct.Struct("<8I")
_SHDR = struct.Struct("<10I")
_IDENT = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)


def _header(phnum: int = 0, shnum: int = 0, shoff: int = 0) -> bytes:
    return _EHDR.pack(_IDENT, elf.ET_EXEC, 248, 1, 0x40000, 52 if phnum else 0, shoff, 1, 52, 32, phnum, 40, shnum,
                      shnum - 1 if shnum else 0)


def _nobits_gib() -> bytes:
    # 172 bytes: a header and three section headers, one of them a 1 GiB .bss.
    sections = [bytes(40), _SHDR.pack(0, elf.SHT_NOBITS, elf.SHF_ALLOC, 0x40000, 0, 1 << 30, 0, 0, 8, 0),
                _SHDR.pack(0, elf.SHT_STRTAB, 0, 0, 0, 0, 0, 0, 1, 0)]
    return _header(shnum=3, shoff=52) + b"".join(sections)


def _segment(address: int, filesz: int, memsz: int) -> bytes:
    return _PHDR.pack(elf.PT_LOAD, 0, address, address, filesz, memsz, elf.PF_R | elf.PF_X, 8)


@pytest.mark.parametrize("data,problem", [
    (_nobits_gib(), "section 1 (0x40000, 0x40000000 bytes) reaches past the end of tile memory (0x200000)"),
    (_header(phnum=1) + _segment(0x40000, 0, 0xFFFFFFFF), "segment 0 (0x40000, 0xffffffff bytes) reaches past"),
    (_header(phnum=4096) + b"".join(_segment(0x40000, 0, 0x1000) for _ in range(4096)),
     "the segments hold more than 0x200000 bytes"),
])
def test_sizes_are_bounded_by_tile_memory_before_anything_is_allocated(data: bytes, problem: str) -> None:
    """A few header bytes cannot make the reader allocate more than a
    tile's memory: a 172-byte file once cost 1 GB, and a 4 GiB segment
    ended in MemoryError."""
    assert len(_nobits_gib()) == 172
    with pytest.raises(elf.ElfError) as caught:
        elf.read_elf(data)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_a_tighter_limit_is_the_callers() -> None:
    data = elf.write_elf("ipu1", 0x40000, [TEXT], [])
    assert elf.read_elf(data, limit=0x40010).segments[0].size == 16
    with pytest.raises(elf.ElfError, match="past the end of tile memory \\(0x4000f\\)"):
        elf.read_elf(data, limit=0x4000F)


def test_a_section_not_allocated_is_written_without_a_segment() -> None:
    note = elf.Section(".note", 0, b"\x04\x00\x00\x00", 0)
    image = elf.read_elf(elf.write_elf("ipu1", 0x40000, [TEXT, note], []))
    assert [s.address for s in image.segments] == [0x40000]
    assert [s.name for s in image.sections] == [".text"]  # the reader lists allocated sections


def test_sixty_five_thousand_program_headers_are_refused_by_their_sizes() -> None:
    """65,535 headers once kept disasm busy for over a minute; what they
    claim together is bounded before any is copied."""
    data = _header(phnum=65535) + b"".join(_segment(0x40000, 0, 64) for _ in range(65535))
    with pytest.raises(elf.ElfError, match="the segments hold more than 0x200000 bytes"):
        elf.read_elf(data)
