# The exchange instructions against every vector of the public record
# (data/exchange-vectors.tsv, data/README.md says where each comes from):
# each word decodes to the row and text the record gives, encodes back to
# the same bits, and its text assembles back to it; sendpicp is one
# instruction of two words whose second word holds its XPIC and PIC values.
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from ipufs.model.isa import Arch, Decoder, encode
from ipufs.model.isa.syntax import Syntax
from ipufs.model.isa.assembler import Assembler

TSV = Path(__file__).parent / "data" / "exchange-vectors.tsv"
VECTORS = list(csv.DictReader(TSV.read_text().splitlines(), delimiter="\t"))
DECODER = Decoder(Arch.IPU21)
SYNTAX = Syntax(Arch.IPU21)


def _value(words: list[int]) -> int:
    return words[0] | (words[1] << 32 if len(words) > 1 else 0)


def test_the_record_has_the_vectors_the_sources_give() -> None:
    assert len(VECTORS) == 147
    mnemonics = {v["assembly"].split()[0] for v in VECTORS}
    assert {"delay", "delaypic", "delayxpic", "send", "sendoff", "sendpic", "sendpicp", "sans", "sync"} <= mnemonics


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['words']}")
def test_each_vector_decodes_to_its_text_and_encodes_back(vector: dict[str, str]) -> None:
    words = [int(w, 16) for w in vector["words"].split()]
    value = _value(words)
    inst = DECODER.decode(value)
    assert inst is not None
    text = SYNTAX.text(inst)
    if inst.row.wide:
        # The record prints the first word's four operands (the SDK's
        # disassembler reads one word); the second word's two follow in ours.
        xpic, pic = inst.operands[4:]
        assert text == f"{vector['assembly']}, {SYNTAX.operand_text(inst.row.operands[4], xpic)}, " \
                       f"{SYNTAX.operand_text(inst.row.operands[5], pic)}"
        if len(words) == 2:
            want = re.search(r"XPIC=(\w+) PIC=(\w+)", vector["evidence"])
            assert want is not None
            assert (xpic, pic) == (int(want.group(1), 0), int(want.group(2), 0))
        else:
            assert (xpic, pic) == (0, 0)
    else:
        assert len(words) == 1
        assert text == vector["assembly"]
    assert encode(inst) == value


@pytest.mark.parametrize("vector", [v for v in VECTORS if v["assembly"].split()[0] not in ("br", "put", "setzi")],
                         ids=lambda v: f"{v['words']}")
def test_each_exchange_text_assembles_to_its_words(vector: dict[str, str]) -> None:
    words = [int(w, 16) for w in vector["words"].split()]
    inst = DECODER.decode(_value(words))
    assert inst is not None
    source = f"\t.supervisor\n\t.section .text, \"ax\", 0x4c000\n\t{SYNTAX.text(inst)}\n"
    data = bytes(Assembler(Arch.IPU21).assemble(source).sections[0].data)
    assert data == encode(inst).to_bytes(inst.row.size, "little")


ROW = """\
    .supervisor
    .section .text, "ax", 0x4c000
    delayxpic 0, 0, 130
    delay 50
    .align 8
    sendpicp 51, 0, 0, 0, 192, 0x14048
    sendpic 7, 0, 0x640
    sendoff 4095, 3, 1
    br $m10
"""


def test_a_row_with_a_two_word_instruction_lists_and_round_trips() -> None:
    from ipufs.model.isa.listing import Chunk, Lister

    text = Assembler(Arch.IPU21).assemble(ROW).sections[0]
    data = bytes(text.data)
    words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
    assert words[:2] == [0x64000082, 0x40A00032]
    assert words[2:4] == [0xF6600000, 0x03014048]  # the SDK row's sendpicp, both words
    lister = Lister(DECODER, Syntax(Arch.IPU21, True), {})
    chunk = Chunk(".text", 0x4C000, data)
    lines = [line for line in lister.objdump([chunk]) if line.strip().startswith("4c0")]
    assert "sendpicp 51, 0, 0, 0, 192, 0x14048" in lines[2]
    assert lines[3].split("\t")[-1] == ""  # the second word is no instruction of its own
    source = "\n".join(lister.source([chunk]))
    assert "sendpicp 51, 0, 0, 0, 192, 0x14048" in source and ".word" not in source
    again = Assembler(Arch.IPU21).assemble(source).sections[0]
    assert bytes(again.data) == data


def test_a_misaligned_sendpicp_is_refused_with_a_reason() -> None:
    from ipufs.model.isa.assembler import AssemblyError

    with pytest.raises(AssemblyError, match="not 8-byte aligned"):
        Assembler(Arch.IPU21).assemble("\t.supervisor\n\t.section .text, \"ax\", 0x4c000\n\tdelay 1\n"
                                       "\tsendpicp 0, 0, 0, 0, 0, 0\n")


def test_the_exchange_instructions_are_the_supervisors_and_ipu21s() -> None:
    with pytest.raises(Exception, match="ipu21"):
        Assembler(Arch.IPU2).assemble("\t.supervisor\n\tdelaypic 0, 0, 0\n")
