# Graphcore's own MC assembler tests for Colossus, run against `ipufs asm`:
# every vector llvm-mc accepts assembles to the same bytes, every one it
# refuses is refused (data/llvm-mc-vectors.txt; data/README.md says where
# they come from and how their RUN lines map onto ipufs asm's options).
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ipufs.model.isa import Arch
from ipufs.model.isa.assembler import Assembler, AssemblyError

DATA = Path(__file__).parent / "data" / "llvm-mc-vectors.txt"
#: llvm-mc's -mattr=+supervisor, its default (a worker), and ipufs's own
#: default (either context).
CONTEXTS = {"supervisor": True, "worker": False, "either": None}


@dataclass(frozen=True)
class Vector:
    where: str  # the test file it comes from, and its place among this file's vectors
    arch: Arch
    context: bool | None
    defined: dict[str, int]
    source: str
    expect: str  # "error", "ok", "same: TEXT", "skip: WHY" or the words


def _vectors() -> list[Vector]:
    out: list[Vector] = []
    header: list[str] | None = None
    lines: list[str] = []
    for line in DATA.read_text().splitlines():
        if line.startswith("@@ "):
            header, lines = line[3:].split(), []
        elif line.startswith("=> ") and header is not None:
            options = dict(o.split("=", 1) for o in header[1:] if not o.startswith("defsym="))
            defined = {d.split("=")[1]: int(d.split("=")[2], 0) for d in header[1:] if d.startswith("defsym=")}
            out.append(Vector(f"{header[0]}#{len(out) + 1}", Arch.named(options.get("arch", "ipu1")),
                              CONTEXTS[options.get("context", "worker")], defined, "\n".join(lines), line[3:]))
            header = None
        elif header is not None:
            lines.append(line)
    return out


VECTORS = _vectors()
RUN = [v for v in VECTORS if not v.expect.startswith("skip:")]


def _bytes(source: str, arch: Arch, context: bool | None, defined: dict[str, int]) -> bytes:
    # llvm-mc's object files put .text at 0; so does this.
    out = Assembler(arch, "t.s", context, defined).assemble(".text 0\n" + source)
    return b"".join(bytes(s.data) for s in out.sections)


@pytest.mark.parametrize("vector", RUN, ids=[v.where for v in RUN])
def test_llvm_mc_vector(vector: Vector) -> None:
    if vector.expect == "error":
        with pytest.raises(AssemblyError):
            _bytes(vector.source, vector.arch, vector.context, vector.defined)
        return
    got = _bytes(vector.source, vector.arch, vector.context, vector.defined)
    if vector.expect == "ok":
        return
    if vector.expect.startswith("same: "):
        want = _bytes(vector.expect[6:].replace("; ", "\n"), vector.arch, None, {})
    else:
        want = b"".join(int(w, 16).to_bytes(4, "little") for w in vector.expect.split())
    assert got.hex() == want.hex()


def test_the_vectors_cover_graphcores_assembler_tests() -> None:
    files = {v.where.split("#")[0] for v in VECTORS}
    assert len(files) == 49  # every .s of llvm/test/MC/Colossus
    accepted = [v for v in RUN if v.expect != "error"]
    assert (len(RUN), len(accepted)) == (226, 57)


def test_each_vector_left_out_says_why() -> None:
    skipped = {v.where.split("#")[0]: v.expect[len("skip: "):] for v in VECTORS if v.expect.startswith("skip:")}
    assert sorted(skipped) == ["assemble-inst-alias.s", "cmpult.s", "imm-address-operands.s", "misaligned_reg_groups.s",
                               "relocation_in_bundle.s", "rpt-fixup.s", "run-fixup.s", "symbol-variants.s"]
    assert all(len(why) > 40 for why in skipped.values())
