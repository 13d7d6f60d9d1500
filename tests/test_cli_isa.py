# `ipufs asm` and `ipufs disasm` as a user runs them: files in, listings
# and ELF files out, one-line errors with exit status 1.
from __future__ import annotations

from pathlib import Path

import pytest

from ipufs import cli
from ipufs.abi import elf

SOURCE = """\
    .text 0x40000
    .globl _start
_start:
    get $m0, $TILE_ID
loop: brnzdec $m0, loop
    .align 8
    { ld32step $a0, $m15, $m1+=, 1 ; f32v2add $a2:3, $a1:B, $a4:5 }
    br $m10
    .data 0x50000
    .word 0xdeadbeef
"""


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_asm_writes_an_elf_that_disasm_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.s").write_text(SOURCE)
    assert _run(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.elf")], capsys) == (0, "", "")
    status, out, err = _run(["disasm", str(tmp_path / "p.elf")], capsys)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert "p.elf:\tfile format elf32-colossus" in lines
    assert "00040000 <_start>:" in lines
    assert "   40000: 03 00 00 41  \tget $m0, $TILE_ID" in lines
    assert "   40004: 01 00 09 13  \tbrnzdec $m0, 0x40004 <loop>" in lines
    assert any(line.endswith("{ ld32step $a0, $m15, $m1+=, 1") for line in lines)
    assert elf.read_elf((tmp_path / "p.elf").read_bytes()).arch == "ipu1"


def test_disasm_source_assembles_back_to_the_same_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.s").write_text(SOURCE)
    cli.main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.elf")])
    status, out, _ = _run(["disasm", "--source", str(tmp_path / "p.elf")], capsys)
    assert status == 0
    (tmp_path / "back.s").write_text(out)
    assert cli.main(["asm", str(tmp_path / "back.s"), "-o", str(tmp_path / "back.elf")]) == 0
    assert (tmp_path / "back.elf").read_bytes() == (tmp_path / "p.elf").read_bytes()


def test_raw_bytes_at_a_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "code.bin").write_bytes((0x41800002).to_bytes(4, "little") + (0x4081003F).to_bytes(4, "little"))
    status, out, err = _run(["disasm", "--raw", "--base", "0x400f4", str(tmp_path / "code.bin")], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[-2:] == ["   400f4: 02 00 80 41  \tsync 2", "   400f8: 3f 00 81 40  \tbri 0x400fc"]


@pytest.mark.parametrize("content,problem", [
    (b"\x00\x00\x00\x00\x02\x00\x80\x41", "1 word is not an instruction (shown as .word)"),
    (b"\x02\x00\x80\x41\x00", "truncated: 1 byte after the last whole word"),
])
def test_bad_raw_input_is_listed_then_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                content: bytes, problem: str) -> None:
    (tmp_path / "x.bin").write_bytes(content)
    status, out, err = _run(["disasm", "--raw", str(tmp_path / "x.bin")], capsys)
    assert status == 1 and "sync 2" in out
    assert err.splitlines() == [f"ipufs disasm: {tmp_path / 'x.bin'}: {problem}"]


def test_files_that_are_no_colossus_elf_get_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.elf").write_bytes(elf.write_elf("ipu1", 0, [elf.Section(".text", 0, bytes(64), 6)], [])[:90])
    for path, problem in [("/bin/sh", "an ELF for"), (str(tmp_path / "t.elf"), "truncated"),
                          (str(tmp_path / "missing"), "does not exist")]:
        status, _, err = _run(["disasm", path], capsys)
        assert status == 1 and len(err.splitlines()) == 1 and problem in err, err


def test_asm_errors_are_file_line_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.s").write_text("nop\nfoo $m1\nbri nowhere\n")
    status, out, err = _run(["asm", str(tmp_path / "bad.s")], capsys)
    assert status == 1 and not (tmp_path / "bad.elf").exists()
    assert err.splitlines() == [f"{tmp_path / 'bad.s'}:2: unknown instruction 'foo'",
                                f"{tmp_path / 'bad.s'}:3: undefined symbol nowhere"]


def test_an_elf_without_section_headers_is_listed_by_its_segments(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(elf.write_elf("ipu1", 0x40000, [elf.Section(".text", 0x40000, (0x41800002).to_bytes(4, "little"),
                                                                  elf.SHF_ALLOC | elf.SHF_EXECINSTR)], []))
    data[48:50] = (0).to_bytes(2, "little")  # e_shnum: no section headers
    (tmp_path / "s.elf").write_bytes(bytes(data))
    status, out, err = _run(["disasm", str(tmp_path / "s.elf")], capsys)
    assert (status, err) == (0, "")
    assert "Disassembly of section segment0:" in out and "   40000: 02 00 80 41  \tsync 2" in out


def test_the_elf_architecture_and_the_context_choose_what_is_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.s").write_text(".worker\nget $m0, $WSR\nuget $a0, $FP_CTL\nldb8 $a1, $m0, $m1, 0\n")
    assert cli.main(["asm", "--arch", "ipu21", str(tmp_path / "w.s"), "-o", str(tmp_path / "w.elf")]) == 0
    status, out, _ = _run(["disasm", "--context", "worker", str(tmp_path / "w.elf")], capsys)
    assert status == 0
    assert [line.split("\t")[-1] for line in out.splitlines()[-3:]] == [
        "get $m0, $WSR", "uget $a0, $FP_CTL", "ldb8 $a1, $m0, $m1, 0"]
    status, out, _ = _run(["disasm", "--arch", "ipu1", str(tmp_path / "w.elf")], capsys)
    assert status == 1 and ".word" in out.splitlines()[-1]  # ldb8 is no ipu1 instruction


@pytest.mark.parametrize("base", ["-4", "0x40002", "zz"])
def test_a_bad_base_is_a_usage_error(base: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.bin").write_bytes(bytes(4))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["disasm", "--raw", "--base", base, str(tmp_path / "x.bin")])
    assert exit_.value.code == 2 and len(capsys.readouterr().err.splitlines()) == 1


def test_odd_inputs_get_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.bin").write_bytes(b"")
    assert _run(["disasm", "--raw", str(tmp_path / "empty.bin")], capsys)[0] == 0
    (tmp_path / "bin.s").write_bytes(b"\xff\xfe\x00nop")
    for argv in (["asm", str(tmp_path / "bin.s")], ["asm", str(tmp_path)], ["disasm", str(tmp_path)]):
        status, _, err = _run(argv, capsys)
        assert status == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, (argv, err)


def test_worker_code_round_trips_with_worker_csr_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.s").write_text(".worker\nget $m0, $WSR\nget $m1, $REPEAT_COUNT\nuget $a0, $FP_CTL\n")
    assert cli.main(["asm", str(tmp_path / "w.s"), "-o", str(tmp_path / "w.elf")]) == 0
    status, out, _ = _run(["disasm", "--source", "--context", "worker", str(tmp_path / "w.elf")], capsys)
    assert status == 0 and "get $m0, $WSR" in out
    (tmp_path / "back.s").write_text(out)
    assert cli.main(["asm", str(tmp_path / "back.s"), "-o", str(tmp_path / "back.elf")]) == 0
    assert (tmp_path / "back.elf").read_bytes() == (tmp_path / "w.elf").read_bytes()


def test_each_section_shows_its_own_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # As in an object file, where every section starts at 0.
    code = elf.SHF_ALLOC | elf.SHF_EXECINSTR
    sync2, sync3 = (0x41800002).to_bytes(4, "little"), (0x41800003).to_bytes(4, "little")
    data = elf.write_elf("ipu1", 0, [elf.Section(".text.a", 0, sync2, code), elf.Section(".text.b", 0, sync3, code)],
                         [elf.Symbol("first", 0, ".text.a", True), elf.Symbol("second", 0, ".text.b", True)])
    (tmp_path / "o.elf").write_bytes(data)
    status, out, _ = _run(["disasm", str(tmp_path / "o.elf")], capsys)
    assert status == 0
    a, b = out.split("Disassembly of section .text.b:")
    assert "<first>" in a and "sync 2" in a and "<second>" not in a
    assert "<second>" in b and "sync 3" in b and "<first>" not in b


@pytest.mark.parametrize("command", ["disasm", "asm", "load", "exec"])
def test_a_fifo_or_a_device_is_refused_not_read(command: str, tmp_path: Path) -> None:
    """A FIFO once hung the tools and /dev/zero was read until memory ran
    out: only regular files are read."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device")):
        done = subprocess.run([sys.executable, "-m", "ipufs", command, str(path), "--dev", str(tmp_path)]
                              if command in ("load", "exec") else [sys.executable, "-m", "ipufs", command, str(path)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and done.stderr == f"ipufs {command}: {path}: not a regular file ({kind})\n"


@pytest.mark.parametrize("source,problem", [
    (".p2align 40\n", "x.s:1: .p2align 40: more than the tile memory"),
    (".text 0xfffffffc\nnop\n", "x.s:1: 0xfffffffc is past the end of tile memory"),
    (".text 0x19bff8\n.word 1, 2, 3\n", "x.s:2: section .text grows past the end of tile memory"),
    (".balign 0x4000000\n", "x.s:1: alignment 67108864 is not a power of two up to"),
])
def test_asm_bounds_addresses_and_sizes_by_tile_memory(source: str, problem: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.s").write_text(source)
    status, _, err = _run(["asm", str(tmp_path / "x.s"), "-o", str(tmp_path / "x.elf")], capsys)
    assert status == 1 and err.startswith(f"{tmp_path}/{problem}") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "x.elf").exists()


def test_a_hostile_elf_header_costs_no_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import resource
    import struct

    # 172 bytes claiming a 1 GiB .bss: refused in one line before anything is allocated.
    shdrs = bytes(40) + struct.pack("<10I", 0, elf.SHT_NOBITS, elf.SHF_ALLOC, 0x40000, 0, 1 << 30, 0, 0, 8, 0) + \
        struct.pack("<10I", 0, elf.SHT_STRTAB, 0, 0, 0, 0, 0, 0, 1, 0)
    head = struct.pack("<16sHHIIIIIHHHHHH", b"\x7fELF\x01\x01\x01" + bytes(9), 2, 248, 1, 0x40000, 0, 52, 1, 52, 32, 0,
                       40, 3, 2)
    (tmp_path / "h.elf").write_bytes(head + shdrs)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status, _, err = _run(["disasm", str(tmp_path / "h.elf")], capsys)
    assert status == 1 and "reaches past the end of tile memory" in err and len(err.splitlines()) == 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: far from 1 GiB


def test_asm_takes_llvm_mcs_context_and_defsym(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.s").write_text(".ifdef FAST\nsync 2\n.endif\n")
    path, out = str(tmp_path / "c.s"), str(tmp_path / "c.elf")
    assert _run(["asm", path, "-o", out, "--context", "supervisor", "--defsym", "FAST=1"], capsys)[0] == 0
    assert elf.read_elf((tmp_path / "c.elf").read_bytes()).sections[0].data == (0x41800002).to_bytes(4, "little")
    status, _, err = _run(["asm", path, "-o", out, "--context", "worker", "--defsym", "FAST"], capsys)
    assert status == 1 and "sync is a supervisor instruction (this is .worker code)" in err


def test_asm_says_warnings_and_still_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.s").write_text(".worker\n.align 8\n{ rpt $m0, 3 ; fnop }\n{ nop ; fnop }\n")
    status, _, err = _run(["asm", str(tmp_path / "w.s"), "-o", str(tmp_path / "w.elf")], capsys)
    assert status == 0 and (tmp_path / "w.elf").exists()
    assert err == f"{tmp_path}/w.s:3: warning: the rpt's body (3 more bundles) runs past the end of its section\n"


def test_disasm_source_of_runs_of_rpt_words_assembles_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rpt $m0, 5` then `rpt $m0, 0` and nops: the source listing once
    stopped with "Indices for islice()"."""
    words = [0x4300A005, 0x4300A000] + [0x19E00000] * 6
    (tmp_path / "r.bin").write_bytes(b"".join(w.to_bytes(4, "little") for w in words))
    status, out, err = _run(["disasm", "--raw", "--source", str(tmp_path / "r.bin")], capsys)
    assert (status, err) == (0, "")
    (tmp_path / "r.s").write_text(out)
    assert _run(["asm", str(tmp_path / "r.s"), "-o", str(tmp_path / "r.elf")], capsys)[0] == 0
    assert elf.read_elf((tmp_path / "r.elf").read_bytes()).sections[0].data == (tmp_path / "r.bin").read_bytes()
