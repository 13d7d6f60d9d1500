# The tile-code commands of `ipufs`: `disasm` (llvm-objdump -d style, or
# assembler source with --source), `asm` (source to an elf32-colossus
# executable) and `load` (an ELF's segments into tiles' memory through the
# exchange BAR). docs/isa.md describes them; every mistake is one line on
# stderr and exit status 1 (2 for a bad command line).
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ipufs.abi import elf
from ipufs.model.isa.listing import Chunk, Lister


def _arch(name: str | None, image_arch: str | None = None) -> Any:
    from ipufs.model.isa.table import Arch

    return Arch.named(name or image_arch or "ipu1")


def _chunks(image: elf.ElfImage) -> list[Chunk]:
    """The sections to list (the segments when there are no section headers)."""
    if image.sections:
        return [Chunk(s.name, s.address, s.data, s.executable, bool(s.flags & elf.SHF_WRITE),
                      _labels(image, s.name)) for s in image.sections]
    return [Chunk(f"segment{i}", s.address, s.data + bytes(s.size - len(s.data)), s.executable,
                  bool(s.flags & elf.PF_W)) for i, s in enumerate(image.segments)]


def _labels(image: elf.ElfImage, section: str) -> dict[int, str]:
    """A section's own labels: in an object file every section starts at 0."""
    names: dict[int, str] = {}
    for s in sorted(image.symbols, key=lambda y: not y.bound_global):
        if s.section == section:
            names.setdefault(s.value, s.name)
    return names


def _symbols(image: elf.ElfImage) -> tuple[dict[int, str], frozenset[str]]:
    names: dict[int, str] = {}
    for s in sorted(image.symbols, key=lambda y: not y.bound_global):  # a global name wins an address
        if s.section is not None:
            names.setdefault(s.value, s.name)
    return names, frozenset(s.name for s in image.symbols if s.bound_global)


def cmd_disasm(args: argparse.Namespace) -> int:
    from ipufs.model.isa.decoder import Decoder
    from ipufs.model.isa.syntax import Syntax

    path = Path(args.file)
    data = path.read_bytes()
    symbols: dict[int, str] = {}
    globals_: frozenset[str] = frozenset()
    if args.raw:
        arch = _arch(args.arch)
        base = args.base if args.base is not None else _default_base(arch)
        chunks = [Chunk(".data" if args.data else ".text", base, data, not args.data)]
        form = "binary"
    else:
        if args.base is not None:
            raise ValueError("--base goes with --raw (an ELF says where its bytes go)")
        try:
            image = elf.read_elf(data)
        except elf.ElfError as exc:
            raise elf.ElfError(f"{path}: {exc}") from None
        arch = _arch(args.arch, image.arch)
        chunks = _chunks(image)
        symbols, globals_ = _symbols(image)
        form = "elf32-colossus"
    supervisor = {"supervisor": True, "worker": False}[args.context]
    lister = Lister(Decoder(arch), Syntax(arch, supervisor), symbols, globals_)
    out = sys.stdout
    if args.source:
        out.write(f"# {path.name}: {form}, {arch.name.lower()}\n")
        blocks: Iterator[list[str]] = _batched(lister.source(chunks))
    else:
        out.write(f"\n{path.name}:\tfile format {form}\n")
        blocks = lister.objdump_blocks(chunks)
    for block in blocks:
        if block:
            out.write("\n".join(block))
            out.write("\n")
    out.flush()
    problems = _input_problems(lister, chunks)
    if problems:
        print(f"ipufs disasm: {path}: {problems}", file=sys.stderr)
        return 1
    return 0


def _batched(lines: Iterator[str], size: int = 4096) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= size:
            yield batch
            batch = []
    yield batch


def _input_problems(lister: Lister, chunks: list[Chunk]) -> str:
    bad = lister.undecodable
    tail = sum(len(c.data) % 4 for c in chunks if c.code)
    said = []
    if bad:
        said.append(f"{bad} words are not instructions (shown as .word)" if bad != 1 else
                    "1 word is not an instruction (shown as .word)")
    if tail:
        said.append(f"truncated: {tail} byte{'s' if tail != 1 else ''} after the last whole word")
    return "; ".join(said)


def _default_base(arch: Any) -> int:
    from ipufs.model.profile import PROFILES

    return PROFILES[arch.name.lower()].tile_memory_base


def cmd_asm(args: argparse.Namespace) -> int:
    from ipufs.model.isa.assembler import Assembler, AssemblyError

    source = Path(args.file)
    arch = _arch(args.arch)
    try:
        result = Assembler(arch, str(source)).assemble(source.read_text())
    except AssemblyError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return 1
    except UnicodeDecodeError:
        raise ValueError(f"{source}: not a text file") from None
    sections = [elf.Section(s.name, s.address or 0, bytes(s.data),
                            elf.SHF_ALLOC | (elf.SHF_EXECINSTR if s.code else 0) | (elf.SHF_WRITE if "w" in s.flags
                                                                                    else 0))
                for s in result.sections]
    symbols = [elf.Symbol(name, address, section, name in result.globals)
               for name, (section, address) in sorted(result.symbols.items(), key=lambda kv: kv[1][1])]
    output = Path(args.output) if args.output else source.with_suffix(".elf")
    output.write_bytes(elf.write_elf(arch.name.lower(), result.entry, sections, symbols))
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    from ipufs.client import Device
    from ipufs.client.loader import parse_tiles
    from ipufs.tools import devices

    data = Path(args.file).read_bytes()
    root = devices.root(args.dev)
    with Device(args.ipu, root) as device:
        count = device.read_register("TILE_COUNT")
        tiles = parse_tiles(args.tiles, count) if args.tiles else list(range(count))
        try:
            written = device.load_elf(data, tiles)
        except elf.ElfError as exc:
            raise elf.ElfError(f"{args.file}: {exc}") from None
    print(f"loaded {written:,} bytes into each of {len(tiles)} tile{'s' if len(tiles) != 1 else ''} "
          f"of ipu{args.ipu}")
    return 0


def _address(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (decimal, or 0x hex)") from None
    if not 0 <= value < 1 << 32 or value % 4:
        raise argparse.ArgumentTypeError(f"{text!r} is not a 4-byte aligned 32-bit address")
    return value


def add_commands(sub: Any, tool: Any) -> None:
    """Add `disasm`, `asm` and `load` to the subcommands ``sub``; ``tool(name,
    help)`` makes a subcommand with the tools' common --dev."""
    d = sub.add_parser("disasm", help="disassemble tile code: an elf32-colossus file, or raw bytes with --raw",
                       description="Print tile code as llvm-objdump -d does (address, the four bytes as they "
                                   "lie in memory, the instruction; co-issued pairs in braces), or as assembler "
                                   "source with --source. Exit status 1 when the input has words that are not "
                                   "instructions (listed as .word), is truncated, or is no Colossus ELF.")
    d.add_argument("file", metavar="FILE")
    d.add_argument("--raw", action="store_true", help="FILE is raw little-endian words, not an ELF")
    d.add_argument("--base", type=_address, help="with --raw: the address of the first byte "
                                                "(default: the first populated tile address, 0x40000 on ipu1)")
    d.add_argument("--data", action="store_true", help="with --raw: list the bytes as data (.word)")
    d.add_argument("--arch", choices=["ipu1", "ipu2", "ipu21"],
                   help="the tile architecture (default: the ELF's e_flags, else ipu1)")
    d.add_argument("--context", choices=["supervisor", "worker"], default="supervisor",
                   help="whose CSR names to print (default supervisor)")
    d.add_argument("--source", action="store_true", help="print assembler source that `ipufs asm` turns back "
                                                         "into the same bytes")
    d.set_defaults(func=cmd_disasm)

    a = sub.add_parser("asm", help="assemble tile code into an elf32-colossus executable",
                       description="Assemble FILE.s (llvm-mc syntax for Colossus; directives in docs/isa.md) "
                                   "into an ELF executable. Errors are FILE:LINE: problem, one per line, exit "
                                   "status 1.")
    a.add_argument("file", metavar="FILE.s")
    a.add_argument("-o", "--output", metavar="FILE.elf", help="the output (default FILE.elf)")
    a.add_argument("--arch", choices=["ipu1", "ipu2", "ipu21"], help="the tile architecture (default ipu1)")
    a.set_defaults(func=cmd_asm)

    ld = tool("load", "load an elf32-colossus file into tiles' memory through the exchange BAR")
    ld.add_argument("file", metavar="FILE.elf")
    ld.add_argument("--ipu", type=int, default=0, help="the IPU (default 0)")
    ld.add_argument("--tiles", help="which tiles: 0-1215, 3 or 0,2,5-9 (default every tile)")
    ld.set_defaults(func=cmd_load)
