#!/usr/bin/env python3
# Writes ipufs/model/isa/rows.py, the instruction table, from a
# colossus-encodings.tsv (one row per encoding: fixed bits, operand fields,
# flags; its columns are described in tests/model/isa/data/README.md). Run
# once when the facts change; the checked-in rows.py is the source of truth
# and tests/model/isa/test_table.py checks it against the TSV.
#
#   python scripts/generate_isa_table.py tests/model/isa/data/colossus-encodings.tsv
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "ipufs" / "model" / "isa" / "rows.py"

#: TSV operand kind -> the table's kind token (ipufs/model/isa/operands.py).
KINDS = {
    "MR": "m", "AR": "a", "ARPairOperand": "a2", "ARQuadOperand": "a4", "MRPair": "m2",
    "BroadcastOperand": "a:B", "BroadcastLowerOperand": "a:BL", "BroadcastUpperOperand": "a:BU",
    "Rel19S2Operand": "abs", "Rel20Operand": "zi", "Rel16Operand": "zi", "Rel8Operand": "zi",
    "RunOperand": "zi", "imm12iz": "iz", "csr": "csr", "ucsr": "ucsr",
}
#: The CSR number of get/put (lower space) and uget/uput (upper space).
CSR_ACCESS = {"get": "csr", "put": "csr", "uget": "ucsr", "uput": "ucsr"}
CONTEXTS = {"common": "BOTH", "worker": "WORKER", "supervisor": "SUPERVISOR", "sanae6-extra": "SUPERVISOR"}
ARCHS = {"all": "IPU1", "ipu2+": "IPU2", "ipu21+": "IPU21"}

#: Post-modified address operands print with a mark (LLVM's printer; G's MC
#: tests): `++` fixed-size increment, `@` delta register reloaded, `>>`
#: mini-delta shifted. Every other post-incremented operand prints `+=`.
SUFFIXES = {
    ("ldd16a32", "op1"): "++", ("ldd16a32", "op2"): "@",
    ("ldd16a64", "op1"): "++", ("ldd16a64", "op2"): "@",
    ("ldd16b16", "op1"): "++", ("ldd16b16", "op2"): "@",
    ("ldd16v2a32", "op1"): "++", ("ldd16v2a32", "op2"): "@",
    ("ldb16b16", "op2"): "++", ("ldb16b16", "op1"): ">>",
    ("ld64a32", "op1"): "++",
}


def group(flags: set[str], lane: str) -> str:
    if "control" in flags:
        return "CONTROL"
    if "system" in flags:
        return "SYSTEM"
    if "load" in flags and "store" in flags:
        return "LOAD_STORE"
    if "load" in flags:
        return "LOAD"
    if "store" in flags:
        return "STORE"
    return "MAIN_ALU" if lane == "main" else "AUX_ALU"


def operand_spec(kind: str, bits: str, suffix: str) -> str:
    width = 0
    pieces = []
    for piece in bits.split(","):
        m = re.fullmatch(r"(\d+)-(\d+)(?:\{(\d+)-(\d+)\})?|(\d+)", piece)
        assert m, piece
        if m.group(5):
            hi = lo = int(m.group(5))
        else:
            hi, lo = int(m.group(1)), int(m.group(2))
        vlo = int(m.group(4)) if m.group(4) else 0
        width = max(width, vlo + hi - lo + 1)
        pieces.append(f"{hi}-{lo}" + (f"={vlo}" if m.group(3) else ""))
    token = KINDS.get(kind)
    if token is None:
        m = re.fullmatch(r"imm(\d+)(zi|si)", kind)
        assert m, kind
        token = m.group(2)
    return f"{token}@{','.join(pieces)}{suffix}"


def main(tsv: str) -> None:
    rows = list(csv.DictReader(open(tsv), delimiter="\t"))
    lines = []
    for r in sorted(rows, key=lambda r: (r["mnemonic"], r["variant"])):
        ops = {}
        for op in r["operands"].split("; "):
            name, rest = op.split(":", 1)
            kind, bits = rest.split("@")
            if kind != "coissue-flag":
                ops[name] = (kind, bits)
        flags = set(f.split("=")[0] for f in r["flags"].split(","))
        tied = set()
        if "tied=" in r["flags"]:
            for token in r["flags"].split("tied=", 1)[1].split(","):
                if not re.fullmatch(r"op\d+", token):
                    break
                tied.add(token)
        lane = re.search(r"lane=(\w+)", r["flags"]).group(1)
        order = re.findall(r"\$(op\d+)", r["asm_string"])
        specs = []
        for name in order:
            kind, bits = ops[name]
            suffix = ""
            if name in tied:
                mark = SUFFIXES.get((r["mnemonic"], name), "+=") if "postinc" in flags else ""
                suffix = mark + "*"
            if r["mnemonic"] in CSR_ACCESS and kind == "imm8zi":
                kind = CSR_ACCESS[r["mnemonic"]]
            specs.append(operand_spec(kind, bits, suffix))
        mnemonic = r["mnemonic"]
        variant = r["variant"].removeprefix("inst_")
        mask, value = int(r["mask_hex"], 16), int(r["value_hex"], 16)
        lines.append(
            f"    Row({mnemonic!r}, {variant!r}, 0x{mask:08x}, 0x{value:08x}, {' '.join(specs)!r},\n"
            f"        {lane.upper()}, {CONTEXTS[r['file']]}, {group(flags, lane)}, {ARCHS[r['predicate']]}),"
        )
    header = '''\
# The tile instruction set, one row for each encoding (mnemonic, LLVM variant
# name, fixed bits as mask and value, operands in assembly order, lane, contexts,
# group, first architecture). Written once by scripts/generate_isa_table.py
# from the encodings of Graphcore's LLVM back end (ColossusInstrInfo
# {Common,Worker,Supervisor}Generated.td) and the reverse engineers'
# sync/sans/send/delay (docs/isa.md cites each source); now the source of
# truth: add an instruction by adding a row. Operand syntax: operands.py.
from __future__ import annotations

from ipufs.model.isa.table import (
    AUX, AUX_ALU, BOTH, CONTROL, IPU1, IPU2, IPU21, LOAD, LOAD_STORE, MAIN, MAIN_ALU, STORE, SUPERVISOR, SYSTEM,
    WORKER, Row,
)

# fmt: off
ROWS: tuple[Row, ...] = (
'''
    OUT.write_text(header + "\n".join(lines) + "\n)\n")
    print(f"wrote {len(lines)} rows to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
