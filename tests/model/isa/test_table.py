# The instruction table (ipufs/model/isa/rows.py) against the facts it was
# built from (data/colossus-encodings.tsv), and its own consistency: every
# bit of every row accounted for once, and no word matched by two rows.
from __future__ import annotations

import csv
import itertools
import re
from pathlib import Path

import pytest

from ipufs.model.isa import ROWS, Arch, Context, Decoder, Group, Kind, Lane, Row
from ipufs.model.isa.table import COISSUE_BIT

TSV = Path(__file__).parent / "data" / "colossus-encodings.tsv"
FACTS = {r["variant"].removeprefix("inst_"): r for r in csv.DictReader(TSV.read_text().splitlines(), delimiter="\t")}
BY_VARIANT = {r.variant: r for r in ROWS}
#: the IPU21 exchange rows, from ipu-stack's exchange reference (not LLVM's
#: tables: tests/model/isa/test_exchange_vectors.py checks them)
EXCHANGE = {"delaypic_mmmn_zi", "delayxpic_mmmn_zi", "sendoff_mmmn_zi", "sendpic_mmmn_zi",
            "sendpicp_mmmn_zi_bf_zi_zi"}

KIND_OF = {
    "MR": Kind.MRF, "AR": Kind.ARF, "ARPairOperand": Kind.ARF_PAIR, "ARQuadOperand": Kind.ARF_QUAD,
    "MRPair": Kind.MRF_PAIR, "BroadcastOperand": Kind.BROADCAST, "BroadcastLowerOperand": Kind.BROADCAST_LOW,
    "BroadcastUpperOperand": Kind.BROADCAST_HIGH, "Rel19S2Operand": Kind.TARGET, "imm12iz": Kind.TOP12,
}


def _tsv_operands(fact: dict[str, str]) -> dict[str, tuple[str, int]]:
    """op name -> (kind, mask of its word bits)."""
    out = {}
    for op in fact["operands"].split("; "):
        name, rest = op.split(":", 1)
        kind, bits = rest.split("@")
        mask = 0
        for piece in bits.split(","):
            m = re.match(r"(\d+)(?:-(\d+))?", piece)
            assert m
            hi, lo = int(m.group(1)), int(m.group(2) or m.group(1))
            mask |= ((1 << (hi - lo + 1)) - 1) << lo
        out[name] = (kind, mask)
    return out


def test_the_table_has_every_encoding_of_the_facts_and_no_other() -> None:
    assert len(ROWS) == 363 + len(EXCHANGE)
    assert set(BY_VARIANT) == set(FACTS) | EXCHANGE
    assert len(BY_VARIANT) == len(ROWS), "two rows share an LLVM variant name"


@pytest.mark.parametrize("variant", sorted(FACTS))
def test_each_row_says_what_the_facts_say(variant: str) -> None:
    fact, row = FACTS[variant], BY_VARIANT[variant]
    assert row.mnemonic == fact["mnemonic"]
    assert (row.mask, row.value) == (int(fact["mask_hex"], 16), int(fact["value_hex"], 16))
    assert row.lane is Lane(re.search(r"lane=(\w+)", fact["flags"]).group(1))  # type: ignore[union-attr]
    assert row.co_issuable == ("coissue-capable" in fact["flags"])
    assert row.context is {"common": Context.BOTH, "worker": Context.WORKER, "supervisor": Context.SUPERVISOR,
                           "sanae6-extra": Context.SUPERVISOR}[fact["file"]]
    assert row.since is {"all": Arch.IPU1, "ipu2+": Arch.IPU2, "ipu21+": Arch.IPU21}[fact["predicate"]]
    flags = fact["flags"]
    expected_group = (Group.CONTROL if "control" in flags else Group.SYSTEM if "system" in flags
                      else Group.LOAD_STORE if "load" in flags and "store" in flags
                      else Group.LOAD if "load" in flags else Group.STORE if "store" in flags
                      else Group.MAIN_ALU if row.lane is Lane.MAIN else Group.AUX_ALU)
    assert row.group is expected_group
    # Operands: in the assembly order of the facts, same kinds, same bits.
    ops = _tsv_operands(fact)
    order = re.findall(r"\$(op\d+)", fact["asm_string"])
    assert len(row.operands) == len(order)
    for name, operand in zip(order, row.operands):
        kind, mask = ops[name]
        assert operand.mask == mask, (name, hex(operand.mask), hex(mask))
        if kind in KIND_OF:
            assert operand.kind is KIND_OF[kind]
        elif kind.endswith("si"):
            assert operand.kind is Kind.SEXT
        else:
            assert operand.kind in (Kind.ZEXT, Kind.CSR, Kind.UPPER_CSR)
        assert operand.updated == bool(re.search(rf"tied=(op\d+,)*{name}\b", flags))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.variant)
def test_every_bit_of_a_row_is_fixed_or_an_operand_exactly_once(row: Row) -> None:
    seen = row.mask | (0 if row.mask & COISSUE_BIT else COISSUE_BIT)
    for op in row.operands:
        assert not seen & op.mask, f"{row}: operand bits {op.mask:#x} overlap"
        seen |= op.mask
    every = (1 << 8 * row.size) - 1  # a two-word row's second word is all operands
    assert seen == every, f"{row}: bits {~seen & every:#x} belong to nothing"
    assert row.value & ~row.mask == 0


def _overlap(a: Row, b: Row) -> bool:
    """Some word matches both rows' fixed bits."""
    return ((a.value ^ b.value) & a.mask & b.mask) == 0


def test_no_two_rows_match_the_same_word() -> None:
    # So the decoder needs no priority order: a word matches at most one row
    # (on every architecture, since ipu2/ipu21 only add rows). Register
    # fields that are no valid encoding (odd pairs...) make a word match no
    # row at all, never a different one.
    clashes = [(a.variant, b.variant) for a, b in itertools.combinations(ROWS, 2) if _overlap(a, b)]
    assert clashes == []


def test_the_older_sans_encoding_would_overlap_and_is_not_used() -> None:
    # The reverse engineers' first `sans` (bits 26-25 = 11, 24-19 = 0) overlaps
    # the *pace loads and contradicts the boot loader's 0x40c00001; the table
    # takes their later one (docs/isa.md, "Overlaps").
    old = Row("sans", "sans_old", 0xFFF80000, 0x46000000, "zi@18-0", Lane.MAIN, Context.SUPERVISOR,
              Group.SYSTEM, Arch.IPU1)
    assert {b.mnemonic for b in ROWS if _overlap(old, b)} >= {"ld2x64pace", "ld64a32pace", "ld64b16pace"}
    assert Decoder().decode(0x40C00001).mnemonic == "sans"  # type: ignore[union-attr]


def test_every_mnemonic_of_the_three_tables_and_the_four_extra_ones_is_present() -> None:
    mnemonics = {r.mnemonic for r in ROWS}
    assert {"sync", "sans", "send", "delay", "run", "runall", "ld64putcs", "ld128putcs"} <= mnemonics
    assert len(mnemonics) == len({f["mnemonic"] for f in FACTS.values()}) + len(EXCHANGE)


def test_later_architectures_only_add_rows() -> None:
    ipu1, ipu2, ipu21 = (set(Decoder(a).rows) for a in Arch)
    assert ipu1 < ipu2 < ipu21 == set(ROWS)
    assert {r.mnemonic for r in ipu21 - ipu2} >= {"ldb8", "ldb8step", "f16v2tof8"}
