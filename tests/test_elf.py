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
