# Decoder and encoder: exact round trips over random words, the published
# encodings (the fact file's checks against public disassemblies), words
# assembled by hand from the table, invalid register encodings, bundles,
# and the array decoder agreeing with the word decoder.
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.model.isa import Arch, Bundle, Decoder, EncodingError, Instruction, Row, encode, encode_bundle, encode_row
from ipufs.model.isa.rows import ROWS

DECODERS = {a: Decoder(a) for a in Arch}
IPU1 = DECODERS[Arch.IPU1]


@settings(max_examples=3000)
@given(st.integers(0, 0xFFFFFFFF), st.sampled_from(list(Arch)))
def test_every_word_that_decodes_encodes_back_to_itself(word: int, arch: Arch) -> None:
    inst = DECODERS[arch].decode(word)
    if inst is not None:
        assert encode(inst) == word


@settings(max_examples=400)
@given(st.sampled_from(ROWS), st.integers(0, 0xFFFFFFFF), st.booleans())
def test_every_row_decodes_its_own_words(row: Row, noise: int, coissue: bool) -> None:
    # A word with the row's fixed bits and random operand bits is that row,
    # or not an instruction (an invalid register field), never another row.
    word = (noise & ~row.mask & 0x7FFFFFFF) | row.value | (1 << 31 if coissue and row.co_issuable else 0)
    inst = DECODERS[Arch.IPU21].decode(word)
    assert inst is None or inst.row is row
    if inst is not None:
        assert inst.coissue == (coissue and row.co_issuable)
        assert encode_row(row, inst.operands, inst.coissue) == word


# (word, mnemonic, operand values): colossus-isa.md section 4, the words
# checked against Graphcore's and the reverse engineers' disassemblies.
PUBLISHED = [
    (0x44201021, "add", (2, 2, 1)),
    (0x13190037, "brnzdec", (1, 0x400DC)),
    (0x18A100B7, "call", (10, 0x402DC)),
    (0x19040388, "setzi", (0, 0x40388)),
    (0x1500F000, "runall", (0, 15, 0)),
    (0x41800002, "sync", (2,)),
    (0x41000003, "get", (0, 3)),
    (0x4201803D, "and", (1, 0, 61)),
    (0x4FF10000, "st32", (1, 15, 0, 0)),
    (0xC4203011, "add", (1, 2, 3)),
    (0x40C00001, "sans", (1,)),
    (0x4081003F, "bri", (0x400FC,)),
    # LLVM's nop and fnop (assembler aliases of setzi).
    (0x19E00000, "setzi", (14, 0)),
    (0x1AD00000, "setzi", (13, 0)),
]

# More of the IPU1 tile boot loader's words with the text its published
# llvm-objdump listing gives them (Saghetti0/graphcore-ipu-research,
# research/ipu1/tile_bootloader_ipu1_disassembly.txt); ipufs prints CSRs
# by name where the listing has numbers. All 236 words of that listing
# decode to its text (aliases and CSR names aside).
BOOT_LOADER = [
    (0x39190012, "sub $m9, 18, $m1"),
    (0x78200033, "send 1, 6, 3"),
    (0x40A00028, "delay 40"),
    (0x4EFF8001, "st32step $m15, $m15, $m8+=, 1"),
    (0x4D09F080, "ld32 $m8, $m0, $m15, $m9"),
    (0x4CB89000, "stm32 $m8, $m11, $m9"),
    (0x4410F533, "sort4x16lo $m3, $m1, $m15"),
    (0x4244C00F, "or $m4, $m4, 0xf00000"),
    (0x2A600011, "cmpult $m0, $m6, 17"),
    (0x41801001, "trap 1"),
    (0x43F04000, "exitz $m15"),
    (0x430080A9, "put $EXCHANGE_CTL, $m0"),
    (0x33170107, "min $m7, $m1, 263"),
    (0x22A1FFFC, "add $m1, $m10, -4"),
    (0x44F0F381, "zero $m8"),
    (0x58F0FE70, "zero $a7"),
    (0x42079000, "mov $m7, $m0"),
    (0x18A100B7, "call $m10, 0x402dc"),
]


@pytest.mark.parametrize("word,text", BOOT_LOADER, ids=[f"{w:#010x}" for w, _ in BOOT_LOADER])
def test_boot_loader_words_print_as_the_published_listing(word: int, text: str) -> None:
    from ipufs.model.isa.syntax import Scope, Syntax

    inst = IPU1.decode(word)
    assert inst is not None
    syntax = Syntax(Arch.IPU1, supervisor=True)
    assert syntax.text(inst) == text
    # Read back as llvm-mc reads source: a constant target is a word address.
    row, values = syntax.read(syntax.text(inst, source=True), Scope())
    assert encode_row(row, values) == word


# Assembled by hand from the table: row's value | operand fields.
HAND = [
    ("sub", "sub_mmmn_si", (1, 18, 2)),  # sub $m1, 18, $m2
    ("ld32step", "ld32step_mmmn_si", (0, 15, 8, 2)),  # ld32step $m0, $m15, $m8+=, 2
    ("st32", "st32_mbmn_zi", (1, 2, 3, 0xABC)),  # ARF store, split imm12
    ("st32step", "st32step_mbmn_si", (1, 2, 3, -2)),  # split imm8
    ("ld2xst64pace", "ld2xst64pace_mbbn_ef", (4, 2, 0, 5, 0x2D)),  # quad $a4:7, split imm6
    ("or", "or_mmmn_iz", (3, 4, 0xABC00000)),
    ("send", "send_mmmn_zi", (1, 6, 3)),
    ("run", "run_mmmn_zi", (1, 2, 0xF123)),
    ("f32v2add", "f32v2add_aaat", (2, 1, 4)),  # $a2:3, $a1:B, $a4:5
]


@pytest.mark.parametrize("word,mnemonic,operands", PUBLISHED, ids=[f"{w:#010x}" for w, _, _ in PUBLISHED])
def test_published_encodings(word: int, mnemonic: str, operands: tuple[int, ...]) -> None:
    inst = IPU1.decode(word)
    assert inst is not None and (inst.mnemonic, inst.operands) == (mnemonic, operands)
    assert encode(inst) == word


def _by_variant(variant: str) -> Row:
    return next(r for r in ROWS if r.variant == variant)


@pytest.mark.parametrize("mnemonic,variant,operands", HAND, ids=[v for _, v, _ in HAND])
def test_hand_assembled_words(mnemonic: str, variant: str, operands: tuple[int, ...]) -> None:
    row = _by_variant(variant)
    word = encode_row(row, operands)
    inst = DECODERS[Arch.IPU21].decode(word)
    assert inst is not None and inst.row is row and inst.operands == operands


def test_hand_assembled_words_bit_by_bit() -> None:
    # st32 $a1, $m2, $m3, 0xabc: imm[11:8]->11-8, imm[7:4]->19-16, imm[3:0]->3-0.
    assert encode_row(_by_variant("st32_mbmn_zi"), (1, 2, 3, 0xABC)) == 0x5E2B3A1C
    # st32step $a1, $m2, $m3+=, -2: imm8 0xfe, [3:0]->19-16, [7:4]->3-0.
    assert encode_row(_by_variant("st32step_mbmn_si"), (1, 2, 3, -2)) == 0x5C2E301F
    # brnzdec $m1, 0x400dc (the boot loader's word).
    assert encode_row(_by_variant("brnzdec_mmmn_zi"), (1, 0x400DC)) == 0x13190037


def test_odd_pairs_are_not_instructions() -> None:
    row = _by_variant("f32v2add_aaat")
    good = encode_row(row, (2, 1, 4))
    assert IPU1.decode(good) is not None
    assert IPU1.decode(good | (1 << 4)) is None  # destination $a3:4
    assert IPU1.decode(good | (1 << 12)) is None  # source $a5:6
    with pytest.raises(EncodingError, match="not a valid register"):
        encode_row(row, (3, 1, 4))


def test_misaligned_quads_and_high_m_pairs_are_not_instructions() -> None:
    quad = _by_variant("ld128step_mmbn")
    assert IPU1.decode(encode_row(quad, (4, 1, 2, 3)) | (2 << 4)) is None
    tapack = _by_variant("tapack_mmmn")
    assert IPU1.decode(encode_row(tapack, (10, 1, 2, 3))) is not None
    with pytest.raises(EncodingError):
        encode_row(tapack, (12, 1, 2, 3))


def test_operand_scales() -> None:
    bri = _by_variant("bri_mmmn_zi")
    or_iz = _by_variant("or_mmmn_iz")
    assert bri.operands[0].scale == 4 and or_iz.operands[2].scale == 1 << 20
    assert or_iz.operands[0].scale == 1


def test_architecture_gates_rows() -> None:
    ldb8 = next(r for r in ROWS if r.mnemonic == "ldb8")
    word = ldb8.value
    assert IPU1.decode(word) is None and DECODERS[Arch.IPU2].decode(word) is None
    assert DECODERS[Arch.IPU21].decode(word).row is ldb8  # type: ignore[union-attr]


def test_values_out_of_range_are_refused() -> None:
    add_si = _by_variant("add_mmmn_si")
    with pytest.raises(EncodingError):
        encode_row(add_si, (1, 2, 70000))
    with pytest.raises(EncodingError):
        encode_row(_by_variant("bri_mmmn_zi"), (0x40002,))
    with pytest.raises(EncodingError, match="co-issued"):
        encode_row(_by_variant("sync_mmmn_zi"), (2,), coissue=True)


def _inst(variant: str, operands: tuple[int, ...], coissue: bool = True) -> Instruction:
    return Instruction(_by_variant(variant), operands, coissue)


def test_bundles_pair_a_main_then_an_aux_instruction() -> None:
    main = _inst("ld32step_mmbn_si", (0, 15, 1, 1))  # ld32step $a0, $m15, $m1+=, 1
    aux = _inst("f32v2add_aaat", (2, 1, 4))
    words = encode_bundle(Bundle(main, aux))
    assert all(w >> 31 for w in words)
    assert IPU1.decode_pair(*words) == Bundle(main, aux)
    assert IPU1.decode_bundle(words[0] | words[1] << 32) == Bundle(main, aux)
    # Reversed, without the flag, or with a context no one has: refused.
    assert "aux-lane" in str(IPU1.decode_pair(words[1], words[0]))
    assert "co-issue bit" in str(IPU1.decode_pair(words[0], words[1] & 0x7FFFFFFF))
    putcs = _inst("ld64putcs_mmmn_zi", (3,))
    assert "no context" in str(IPU1.decode_pair(encode(putcs), words[1]))
    with pytest.raises(EncodingError):
        encode_bundle(Bundle(aux, main))


@settings(max_examples=30)
@given(st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=300), st.sampled_from(list(Arch)))
def test_the_array_decoder_agrees_with_the_word_decoder(words: list[int], arch: Arch) -> None:
    d = DECODERS[arch]
    # Mix in valid words of random rows, so matches are common.
    words = words + [(w & ~r.mask) | r.value for w, r in zip(words, d.rows[:: max(1, len(d.rows) // 50)])]
    rows = d.classify(np.array(words, dtype=np.uint32))
    for w, i in zip(words, rows.tolist()):
        inst = d.decode(w)
        assert (inst.row if inst else None) is (d.rows[i] if i >= 0 else None), hex(w)


@pytest.mark.parametrize("pair", range(8))
def test_llvm_register_pair_vectors(pair: int) -> None:
    # Graphcore's MC test Disassembler/Colossus/reg-pairs.txt: st64 with
    # $a2N:2N+1 decodes, the odd field next to it is an invalid encoding.
    from ipufs.model.isa.syntax import Syntax

    good = 0x5F20F000 | (2 * pair) << 4
    inst = IPU1.decode(good)
    assert inst is not None
    assert Syntax().text(inst) == f"st64 $a{2 * pair}:{2 * pair + 1}, $m2, $m15, 0"
    assert IPU1.decode(good | 1 << 4) is None


def test_two_main_lane_instructions_are_no_bundle() -> None:
    # LLVM's disassembler prints these words (Disassembler/Colossus/
    # bundle-disassemble.txt) as a bundle of two adds; its assembler refuses
    # such a bundle (assemble-invalid-bundles.s), and so does ipufs's decoder.
    assert IPU1.decode_pair(0xC4203011, 0xC4506041) == \
        "add is a main-lane instruction: a bundle ends with an aux-lane one"
