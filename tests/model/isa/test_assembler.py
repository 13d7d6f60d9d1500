# The assembler and the listings: source to bytes, bytes to listings, and
# the round trip (disassemble as source, assemble again: the same bytes at
# the same addresses), over hand-written programs and random words.
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.model.isa import Arch, Decoder
from ipufs.model.isa.assembler import NOP, Assembled, AssemblyError, Assembler
from ipufs.model.isa.listing import Chunk, Lister
from ipufs.model.isa.syntax import Syntax

PROGRAM = """\
# a supervisor program
    .text 0x40000
    .globl _start
_start:
    sync 2                      // all workers done
    get $m0, $TILE_ID
    and $m1, $m0, 61
    setzi $m2, worker
    runall $m2, $mzero, 0
loop: brnzdec $m1, loop
    call $lr, helper
    .align 8
    {
      ld32step $a0, $m15, $m1+=, 1
      f32v2add $a2:3, $a1:B, $a4:5
    }
    { nop ; fnop }
    bri _start
helper:
    br $m10
worker:
    zero $m3
    mov $m4, $m3
    adds $m5, $m4, 7
    exitz $m15
    .data 0x50000
table: .word 1, -2, table, 0xdeadbeef
    .byte 1, 2, 3
"""


def _words(section: bytes) -> list[int]:
    return [int.from_bytes(section[i:i + 4], "little") for i in range(0, len(section) - 3, 4)]


def _assemble(text: str, arch: Arch = Arch.IPU1) -> Assembled:
    return Assembler(arch, "t.s").assemble(text)


def test_a_program_assembles_to_the_words_the_table_gives() -> None:
    out = _assemble(PROGRAM)
    text, data = out.sections
    assert (text.name, text.address, data.name, data.address) == (".text", 0x40000, ".data", 0x50000)
    words = _words(bytes(text.data))
    assert words[:3] == [0x41800002, 0x41000003, 0x4201803D]  # the boot loader's own words
    assert words[5] == 0x13190000 | (0x40014 >> 2)  # brnzdec $m1, loop (absolute word address)
    assert words[7] == NOP  # .align 8 padding
    assert words[8] >> 31 and words[9] >> 31  # the bundle: both halves flagged
    assert words[10:12] == [NOP | 1 << 31, 0x1AD00000 | 1 << 31]
    assert out.symbols["worker"] == (".text", 0x40000 + 4 * 14)
    assert words[3] == 0x19000000 | (2 << 20) | out.symbols["worker"][1]  # setzi $m2, worker
    assert _words(bytes(data.data)) == [1, 0xFFFFFFFE, 0x50000, 0xDEADBEEF]
    assert bytes(data.data)[-3:] == b"\x01\x02\x03"
    assert out.entry == 0x40000 and out.globals == {"_start"}


def _round_trip(chunks: list[Chunk], arch: Arch = Arch.IPU1, symbols: dict[int, str] | None = None) -> None:
    lister = Lister(Decoder(arch), Syntax(arch, True), symbols or {})
    source = "\n".join(lister.source(chunks))
    out = _assemble(source, arch)
    got = {s.name: (s.address, bytes(s.data)) for s in out.sections}
    assert got == {c.name: (c.address, c.data) for c in chunks if c.data}, source


def test_a_program_round_trips_through_its_listing() -> None:
    out = _assemble(PROGRAM)
    names = {address: name for name, (_, address) in out.symbols.items()}
    _round_trip([Chunk(s.name, s.address or 0, bytes(s.data), s.code, "w" in s.flags) for s in out.sections],
                symbols=names)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 0xFFFFFFFF), max_size=64), st.sampled_from(list(Arch)), st.binary(max_size=3))
def test_random_code_round_trips(words: list[int], arch: Arch, tail: bytes) -> None:
    # Any bytes at all: instructions, bundles good and bad, words that are
    # not instructions, a ragged end.
    data = b"".join(w.to_bytes(4, "little") for w in words) + tail
    _round_trip([Chunk(".text", 0x40000, data)], arch)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_bundles_round_trip(data: st.DataObject) -> None:
    d = Decoder(Arch.IPU1)
    mains = [r for r in d.rows if r.lane.value == "main" and r.co_issuable]
    auxes = [r for r in d.rows if r.lane.value == "aux"]
    words = []
    for _ in range(8):
        a, b = data.draw(st.sampled_from(mains)), data.draw(st.sampled_from(auxes))
        na, nb = data.draw(st.integers(0, 0xFFFFFFFF)), data.draw(st.integers(0, 0xFFFFFFFF))
        words += [(na & ~a.mask) | a.value | 1 << 31, (nb & ~b.mask) | b.value | 1 << 31]
    _round_trip([Chunk(".text", 0x40000, b"".join(w.to_bytes(4, "little") for w in words))])


def test_objdump_listing_shows_addresses_bytes_labels_and_bundles() -> None:
    out = _assemble(PROGRAM)
    text = out.sections[0]
    names = {address: name for name, (_, address) in out.symbols.items()}
    lines = list(Lister(Decoder(), Syntax(), names).objdump([Chunk(".text", 0x40000, bytes(text.data))]))
    assert "00040000 <_start>:" in lines
    assert "   40000: 02 00 80 41  \tsync 2" in lines
    assert "   40014: 05 00 19 13  \tbrnzdec $m1, 0x40014 <loop>" in lines
    bundle = [line for line in lines if "{" in line or "}" in line]
    assert bundle[0].endswith("{ ld32step $a0, $m15, $m1+=, 1")
    assert bundle[1].endswith("  f32v2add $a2:3, $a1:B, $a4:5 }")


def test_words_that_are_not_instructions_are_listed_as_data() -> None:
    lister = Lister(Decoder(), Syntax())
    lines = list(lister.objdump([Chunk(".text", 0x40000, bytes(4) + (0xC4203011).to_bytes(4, "little"))]))
    assert lines[-2].endswith(".word 0x00000000")
    assert lines[-1].endswith(".word 0xc4203011")  # a co-issue flag with no partner
    assert lister.undecodable == 2


@pytest.mark.parametrize("source,problem", [
    ("foo $m1", "t.s:1: unknown instruction 'foo'"),
    ("add $m1, $m2", "t.s:1: add takes 3 operands, not 2"),
    ("\n  ld32step $a0, $m15, $m1, 1", "operand 3 ($m1) must be written +="),
    ("bri nowhere", "t.s:1: undefined symbol nowhere"),
    ("{ add $m1, $m2, $m3 ; add $m4, $m5, $m6 }", "a bundle ends with an aux-lane one"),
    ("sync 2\n{ nop ; fnop }", "t.s:2: bundle at 0x40004 is not 8-byte aligned"),
    (".worker\nsync 1", "t.s:2: sync is a supervisor instruction (this is .worker code)"),
    (".supervisor\nf32add $a0, $a1, $a2", "t.s:2: f32add is a worker instruction"),
    ("get $m0, $NOPE", "t.s:1: unknown CSR $NOPE"),
    (".supervisor\nget $m0, $WSR", "t.s:2: unknown CSR $WSR"),
    (".worker\nget $m0, $SSR", "t.s:2: unknown CSR $SSR"),
    (".supervisor\nget $m0, $REPEAT_COUNT", "t.s:2: unknown CSR $REPEAT_COUNT"),
    ("ldb8 $a0, $m0, $m1, 0", "t.s:1: ldb8 needs ipu21 or later"),
    ("add $m1, $m2, 70000", "does not fit"),
    ("f32v2add $a3:4, $a1:B, $a4:5", "an $a pair starts at an even register"),
    (".bogus", "t.s:1: unknown directive .bogus"),
    ("a:\na:", "t.s:2: label a is already defined on line 1"),
    (".text 0x40000\nnop\n.data 0x40000\n.word 1", "overlap"),
    ("{ nop", "t.s:1: bundle not closed"),
])
def test_errors_name_the_line_and_the_problem(source: str, problem: str) -> None:
    with pytest.raises(AssemblyError) as caught:
        _assemble(source)
    assert any(problem in p for p in caught.value.problems), caught.value.problems
    assert all("\n" not in p for p in caught.value.problems)


def test_every_error_is_reported_not_only_the_first() -> None:
    with pytest.raises(AssemblyError) as caught:
        _assemble("foo\nnop\nbar\nbri nowhere")
    assert [p.split(":")[1] for p in caught.value.problems] == ["1", "3", "4"]


def test_sections_without_an_address_follow_those_with_one() -> None:
    out = _assemble(".data\n.word 7\n.text 0x40000\nnop\nnop\n")
    placed = {s.name: s.address for s in out.sections}
    assert placed == {".text": 0x40000, ".data": 0x40008}
    assert _assemble("nop").sections[0].address == 0x40000  # ipu1's first populated address
    assert _assemble("nop", Arch.IPU2).sections[0].address == 0x4C000  # the GC200's


RPT = """\
    .worker
    .align 8
    {{ rpt $m0, 1 ; fnop }}
    {body}
    exitz $m15
"""
GOOD_BODY = "{ ld32step $a0, $m15, $m1+=, 1 ; f32add $a1, $a1, $a0 }\n    { nop ; fnop }"


def test_a_repeat_body_of_bundles_assembles() -> None:
    words = _words(bytes(_assemble(RPT.format(body=GOOD_BODY)).sections[0].data))
    assert len(words) == 7 and words[0] == 0xC300A001  # rpt $m0, 1 with the co-issue flag


@pytest.mark.parametrize("body,problem", [
    ("{ nop ; fnop }\n    nop", "t.s:5: the body of the rpt on line 3 holds bundles only"),
    ("{ nop ; fnop }\n    { bri 0x40000 ; fnop }", "t.s:5: no control or system instruction in the body"),
    ("{ nop ; fnop }", "t.s:3: the rpt's body (1 more bundle) runs past the end of its section"),
])
def test_repeat_bodies_follow_llvms_rules(body: str, problem: str) -> None:
    text = RPT.format(body=body)
    if "runs past" in problem:
        text = text.replace("    exitz $m15\n", "")
    with pytest.raises(AssemblyError) as caught:
        _assemble(text)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_an_rpt_whose_body_would_not_assemble_is_listed_as_words() -> None:
    # { rpt $m0, 1 ; fnop } then one bundle and a solo word: the body (2
    # bundles) is short, so the source form keeps the rpt's words as data.
    words = [0xC300A001, 0x9AD00000, 0x99E00000, 0x9AD00000, 0x19E00000, 0x19E00000]
    data = b"".join(w.to_bytes(4, "little") for w in words)
    lines = list(Lister(Decoder(), Syntax()).source([Chunk(".text", 0x40000, data)]))
    assert lines[1:3] == ["\t.word 0xc300a001  # an rpt whose body would not assemble",
                          "\t.word 0x9ad00000  # an rpt whose body would not assemble"]
    _round_trip([Chunk(".text", 0x40000, data)])
    good = data[:16] + data[8:16] + data[16:]  # now two bundles follow
    assert "\t{ rpt $m0, 1 ; setzi $a13, 0 }" in list(Lister(Decoder(), Syntax()).source(
        [Chunk(".text", 0x40000, good)]))
    _round_trip([Chunk(".text", 0x40000, good)])


def test_without_a_context_both_contexts_csr_names_are_read() -> None:
    words = _words(bytes(_assemble("get $m0, $SSR\nget $m1, $WSR\nget $m2, $REPEAT_COUNT").sections[0].data))
    assert [w & 0xFF for w in words] == [1, 1, 4]


def test_labels_the_assembler_cannot_read_are_left_out_of_source() -> None:
    # bri to a symbol named "odd name@1": listed with its address instead.
    data = (0x40810000 | 0x40004 >> 2).to_bytes(4, "little") + (0x41800002).to_bytes(4, "little")
    symbols = {0x40004: "odd name@1", 0x40000: "start"}
    lines = list(Lister(Decoder(), Syntax(), symbols).source([Chunk(".text", 0x40000, data)]))
    assert lines[1:] == ["start:", "\tbri 0x40004", "\tsync 2"]
    _round_trip([Chunk(".text", 0x40000, data)], symbols=symbols)
