# An ipu21 mount driven as a runtime that drives a real C600 drives its
# card (osmarks/ipu-stack, crates/ipu-driver/src/lib.rs), under `ipufs run
# --profile ipu21`: open and map 0x80000 bytes, the bring-up ioctls in
# their real forms (the ICU's reset answer checked), the captured
# configuration replayed through the mapping, tile words written and read
# through an inactive worker with the runtime's injected words, a
# supervisor started by an injected branch, stopped with RUN_BREAK while
# it runs, its PC read, resumed with EXCEPTION_CLEAR. Once in C against
# the header (tests/c/c600_host.c), once in Python (c600_runtime.py).
from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.model.isa import Arch
from ipufs.model.isa.assembler import Assembler
from ipufs.model.profile import PROFILES
from tests.integration.compat_harness import Run, build, public_dir
from tests.integration.harness import ROOT

pytestmark = pytest.mark.mount

IMAGE = ROOT / "tests" / "model" / "data" / "c600-init.ipucfg"
ENTRY, COUNTER = 0x4C100, 0x60000
#: A supervisor that keeps adding 1 to the word at COUNTER.
PROGRAM = Assembler(Arch.IPU21).assemble(f".text {ENTRY:#x}\n.supervisor\n_start:\n  setzi $m2, {COUNTER:#x}\n"
                                         "loop:\n  ld32 $m3, $m2, $m15, 0\n  add $m3, $m3, 1\n"
                                         "  st32 $m3, $m2, $m15, 0\n  bri loop\n")
#: Logical tile 45, physical 1410 (the C600's numbering: the TDI takes physical ones).
TILE = PROFILES["ipu21"].tile_map.physical[45]


def _arguments() -> list[str]:
    data = bytes(PROGRAM.sections[0].data)
    words = struct.unpack(f"<{len(data) // 4}I", data)
    return [str(IMAGE), str(TILE), hex(ENTRY), hex(COUNTER), *(hex(w) for w in words)]


@pytest.fixture(scope="module")
def program() -> Iterator[Path]:
    with public_dir() as out:
        yield build("c600_host.c", out)


def _drive(command: list[str], steps: list[str]) -> None:
    run = Run(["--profile", "ipu21", "--ipus", "1"], command)
    try:
        lines = run.until("done")
        status, err = run.finish()
        assert status == 0, (lines, err)
        for step in steps:
            assert any(line.startswith(step) for line in lines), (step, lines)
    finally:
        run.close()


BRING_UP = ["USER_ATTACH ok", "SET_IPU_ID ok", "STOP_MONITORING ok", "MAILBOX_WRITE_READ ok", "START_MONITORING ok",
            "ACCUMULATE_ERRORS ok", "RESET_DEVICE ok", "SET_SECONDARY_IPU_ID ok", "replayed 2003 writes, CCSR 0x4"]


def test_the_runtime_in_c(program: Path) -> None:
    assert TILE == 1410
    _drive([str(program), *_arguments()],
           [*BRING_UP, "icu answer 0x4078", "BUFFER_DETACH_ALL ok", "BUFFER_ATTACH ok", "BUFFER_DETACH ok",
            "started: state 1, counter moving", "stopped: state 2, pc in the program, counter held",
            "resumed: state 1, counter moving", "exceptions 0"])


def test_the_runtime_in_python() -> None:
    _drive([sys.executable, str(ROOT / "tests" / "integration" / "c600_runtime.py"), *_arguments()],
           [*BRING_UP, "started", "stopped in the program, counter held", "resumed"])
