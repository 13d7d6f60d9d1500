# ELF files of tile code, elf32-colossus: 32-bit little-endian ELF (the
# System V gABI layout) with e_machine EM_GRAPHCORE_IPU = 248 and the
# architecture in e_flags (EF_GRAPHCORE_ARCH_IPU1 = 0x1, _IPU2 = 0x2,
# _IPU21 = 0x21, mask 0xff), as Graphcore's LLVM writes them
# (llvm/include/llvm/BinaryFormat/ELF.h of its Colossus back end; binutils
# include/elf/common.h registers 248 too). Reading: header, program
# headers, section headers, the symbol table; writing: an executable with
# one PT_LOAD per allocated section. Bytes in, bytes out: no I/O here.
from __future__ import annotations

import struct
from dataclasses import dataclass

EM_GRAPHCORE_IPU = 248
EF_GRAPHCORE_ARCH_MASK = 0xFF
ARCH_FLAGS = {"ipu1": 0x01, "ipu2": 0x02, "ipu21": 0x21}

PT_LOAD = 1
PF_X, PF_W, PF_R = 1, 2, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS = 1, 2, 3, 8
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
STB_LOCAL, STB_GLOBAL = 0, 1
STT_NOTYPE, STT_FUNC = 0, 2
ET_EXEC = 2

_EHDR = struct.Struct("<16sHHIIIIIHHHHHH")
_PHDR = struct.Struct("<8I")
_SHDR = struct.Struct("<10I")
_SYM = struct.Struct("<IIIBBH")
_MACHINES = {3: "i386", 8: "MIPS", 40: "ARM", 62: "x86-64", 183: "AArch64", 243: "RISC-V"}


#: Tile addresses are 21 bits (R's ADDR[20:0] fields): no loadable byte of
#: a tile program lies at or past 2 MiB, and a file's loadable bytes
#: together are fewer. read_elf's default bound; callers that know the
#: device pass its own tile memory's end.
TILE_ADDRESS_LIMIT = 1 << 21


class ElfError(ValueError):
    """A file that is no readable elf32-colossus ELF (one-line reason)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """A loadable program segment: ``data`` is its file bytes, ``size``
    its size in memory (the rest reads as zeros)."""

    address: int
    data: bytes
    size: int
    flags: int

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    address: int
    data: bytes
    flags: int
    type: int = SHT_PROGBITS

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    value: int
    section: str | None = None  # None: absolute or undefined
    bound_global: bool = False
    size: int = 0


@dataclass(frozen=True, slots=True)
class ElfImage:
    arch: str | None  # ipu1, ipu2, ipu21, or None when e_flags names none
    entry: int
    segments: tuple[Segment, ...]
    sections: tuple[Section, ...]
    symbols: tuple[Symbol, ...]


def arch_of(flags: int) -> str | None:
    want = flags & EF_GRAPHCORE_ARCH_MASK
    return next((name for name, f in ARCH_FLAGS.items() if f == want), None)


def _cut(data: bytes, offset: int, size: int, what: str) -> bytes:
    if offset < 0 or size < 0 or offset + size > len(data):
        raise ElfError(f"truncated: {what} at offset {offset:#x} (+{size:#x}) lies past the end ({len(data):#x} bytes)")
    return data[offset:offset + size]


def read_elf(data: bytes, limit: int = TILE_ADDRESS_LIMIT) -> ElfImage:
    """Parse an elf32-colossus file; ElfError names what is wrong. Every
    loadable segment and allocated section must lie below ``limit``, and
    together hold no more than ``limit`` bytes: a tile's memory is no
    bigger (so a few hostile header bytes cannot make the reader allocate
    gigabytes)."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file (no \\x7fELF magic)")
    head = _cut(data, 0, _EHDR.size, "the ELF header")
    (ident, _type, machine, _version, entry, phoff, shoff, flags, _ehsize, phentsize, phnum,
     shentsize, shnum, shstrndx) = _EHDR.unpack(head)
    if machine != EM_GRAPHCORE_IPU or ident[4] != 1 or ident[5] != 1:
        if ident[5] == 2:
            machine = int.from_bytes(data[18:20], "big")
        name = _MACHINES.get(machine, f"machine {machine}")
        if machine == EM_GRAPHCORE_IPU:
            raise ElfError("not elf32-colossus: not a 32-bit little-endian ELF")
        raise ElfError(f"not elf32-colossus: an ELF for {name} (e_machine {machine}, want {EM_GRAPHCORE_IPU})")
    segments = []
    loaded = _Budget(limit, "segments")
    for i in range(phnum if phoff else 0):
        if phentsize < _PHDR.size:
            raise ElfError(f"program header size {phentsize} is too small")
        p_type, off, vaddr, _paddr, filesz, memsz, pflags, _align = _PHDR.unpack(
            _cut(data, phoff + i * phentsize, _PHDR.size, f"program header {i}"))
        if p_type == PT_LOAD:
            size = max(memsz, filesz)
            loaded.take(vaddr, size, f"segment {i}")
            segments.append(Segment(vaddr, _cut(data, off, filesz, f"segment {i}"), size, pflags))
    raw_sections = []
    for i in range(shnum if shoff else 0):
        if shentsize < _SHDR.size:
            raise ElfError(f"section header size {shentsize} is too small")
        raw_sections.append(_SHDR.unpack(_cut(data, shoff + i * shentsize, _SHDR.size, f"section header {i}")))

    def strings(index: int) -> bytes:
        if not 0 < index < len(raw_sections):
            return b""
        s = raw_sections[index]
        return _cut(data, s[4], s[5], f"string table {index}") if s[1] != SHT_NOBITS else b""

    def name_at(table: bytes, at: int) -> str:
        end = table.find(b"\0", at)
        return table[at:end if end >= 0 else len(table)].decode("utf-8", "replace")

    names = strings(shstrndx)
    sections, section_names = [], []
    allocated = _Budget(limit, "sections")
    for i, (sname, stype, sflags, addr, off, size, _link, _info, _align, _entsize) in enumerate(raw_sections):
        section_names.append(name_at(names, sname))
        if i and sflags & SHF_ALLOC and stype in (SHT_PROGBITS, SHT_NOBITS):
            allocated.take(addr, size, f"section {section_names[-1] or i}")
            body = b"\0" * size if stype == SHT_NOBITS else _cut(data, off, size, f"section {section_names[-1]}")
            sections.append(Section(section_names[-1], addr, body, sflags, stype))
    symbols = []
    for s in raw_sections:
        if s[1] != SHT_SYMTAB:
            continue
        table, text = _cut(data, s[4], s[5], "the symbol table"), strings(s[6])
        for at in range(_SYM.size, len(table) - _SYM.size + 1, _SYM.size):  # entry 0 is the null symbol
            st_name, value, size, info, _other, shndx = _SYM.unpack_from(table, at)
            kind = info & 0xF
            if not st_name or kind > STT_FUNC:  # sections, files: not labels
                continue
            where = section_names[shndx] if 0 < shndx < len(section_names) else None
            symbols.append(Symbol(name_at(text, st_name), value, where, info >> 4 == STB_GLOBAL, size))
    return ElfImage(arch_of(flags), entry, tuple(segments), tuple(sections), tuple(symbols))


class _Budget:
    """The loadable bytes of a file so far, against a tile's memory."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit, self.what, self.total = limit, what, 0

    def take(self, address: int, size: int, name: str) -> None:
        if address + size > self.limit:
            raise ElfError(f"{name} ({address:#x}, {size:#x} bytes) reaches past the end of tile memory "
                           f"({self.limit:#x})")
        self.total += size
        if self.total > self.limit:
            raise ElfError(f"the {self.what} hold more than {self.limit:#x} bytes, more than a tile's memory")


def write_elf(arch: str, entry: int, sections: list[Section], symbols: list[Symbol]) -> bytes:
    """An executable elf32-colossus image: the sections (each allocated
    one also a PT_LOAD segment), a symbol table and the section names."""
    shstr = bytearray(b"\0")
    strtab = bytearray(b"\0")

    def add(table: bytearray, name: str) -> int:
        at = len(table)
        table += name.encode() + b"\0"
        return at

    phnum = sum(1 for s in sections if s.flags & SHF_ALLOC)  # a section not allocated is not loaded
    offset = _EHDR.size + phnum * _PHDR.size
    body = bytearray()
    placed = []
    for s in sections:
        pad = (-offset - len(body)) % 8
        body += b"\0" * pad
        placed.append(offset + len(body))
        body += s.data
    index = {s.name: i + 1 for i, s in enumerate(sections)}
    symtab = bytearray(_SYM.size)
    ordered = sorted(symbols, key=lambda y: y.bound_global)  # locals first, as the gABI asks
    for y in ordered:
        info = ((STB_GLOBAL if y.bound_global else STB_LOCAL) << 4) | STT_NOTYPE
        shndx = index.get(y.section, 0xFFF1) if y.section else 0xFFF1  # SHN_ABS
        symtab += _SYM.pack(add(strtab, y.name), y.value, y.size, info, 0, shndx)
    first_global = 1 + sum(not y.bound_global for y in ordered)
    tables = []
    for content in (symtab, strtab):
        body += b"\0" * ((-offset - len(body)) % 4)
        tables.append(offset + len(body))
        body += content
    shdrs = [bytes(_SHDR.size)]
    for s, at in zip(sections, placed):
        shdrs.append(_SHDR.pack(add(shstr, s.name), SHT_PROGBITS, s.flags, s.address, at, len(s.data), 0, 0, 8, 0))
    n = len(sections)
    shdrs.append(_SHDR.pack(add(shstr, ".symtab"), SHT_SYMTAB, 0, 0, tables[0], len(symtab), n + 2, first_global,
                            4, _SYM.size))
    shdrs.append(_SHDR.pack(add(shstr, ".strtab"), SHT_STRTAB, 0, 0, tables[1], len(strtab), 0, 0, 1, 0))
    shstr_name = add(shstr, ".shstrtab")
    shstr_at = offset + len(body)
    body += shstr
    shdrs.append(_SHDR.pack(shstr_name, SHT_STRTAB, 0, 0, shstr_at, len(shstr), 0, 0, 1, 0))
    body += b"\0" * ((-offset - len(body)) % 4)
    shoff = offset + len(body)
    ident = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
    head = _EHDR.pack(ident, ET_EXEC, EM_GRAPHCORE_IPU, 1, entry, _EHDR.size if phnum else 0, shoff,
                      ARCH_FLAGS[arch], _EHDR.size, _PHDR.size, phnum, _SHDR.size, len(shdrs), len(shdrs) - 1)
    phdrs = b"".join(
        _PHDR.pack(PT_LOAD, at, s.address, s.address, len(s.data), len(s.data),
                   PF_R | (PF_X if s.flags & SHF_EXECINSTR else 0) | (PF_W if s.flags & SHF_WRITE else 0), 8)
        for s, at in zip(sections, placed) if s.flags & SHF_ALLOC)
    return head + phdrs + bytes(body) + b"".join(shdrs)
