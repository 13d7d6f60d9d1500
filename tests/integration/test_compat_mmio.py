# Registers as MMIO through a mapping under `ipufs run` (native/src/
# compat_mmio.c, docs/compat.md): the decoders against vectors, every x86
# form against the processor on a trapped register, and 1,472 tiles
# started with back-to-back mapped stores and loads (BARs by passthrough:
# loads plain memory, stores trapped).
from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.compat_harness import Run, public_dir
from tests.integration.harness import ROOT

pytestmark = pytest.mark.mount


@pytest.fixture(scope="module")
def programs() -> Iterator[dict[str, Path]]:
    with public_dir() as out:
        built = {}
        for name, sources, flags in (("mmio-decode", ["mmio_decode.c"], "-O2"),
                                     ("mmio-forms-O0", ["mmio_forms.c"], "-O0"),
                                     ("mmio-forms-O2", ["mmio_forms.c"], "-O2"),
                                     ("mmio-start", ["mmio_start.c"], "-O2")):
            paths = [str(ROOT / "tests" / "c" / s) for s in sources]
            if name == "mmio-decode":
                paths.append(str(ROOT / "native" / "src" / "compat_decode.c"))
            subprocess.run(["cc", flags, "-Wall", "-Wextra", "-Werror", "-o", str(out / name), *paths], check=True)
            built[name] = out / name
        yield built


def test_the_decoders_agree_with_the_vectors(programs: dict[str, Path]) -> None:
    out = subprocess.run([str(programs["mmio-decode"])], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the forms are x86-64 assembly")
def test_every_x86_form_leaves_what_the_processor_leaves(programs: dict[str, Path]) -> None:
    run = Run(["--profile", "ipu21", "--ipus", "1"],
              ["sh", "-c", f'{programs["mmio-forms-O0"]} && {programs["mmio-forms-O2"]}'])
    try:
        assert run.line().startswith("ok") and run.line().startswith("ok")
        status, err = run.finish()
        assert status == 0, err
    finally:
        run.close()


def _started(run: Run) -> str:
    try:
        lines = run.until("started")
        status, err = run.finish()
        assert status == 0, (lines, err)
        return lines[-1]
    finally:
        run.close()


def test_back_to_back_mapped_stores_start_all_1472_tiles(programs: dict[str, Path]) -> None:
    line = _started(Run(["--profile", "ipu21", "--ipus", "1"], [str(programs["mmio-start"])]))
    assert line.startswith("started 1472 of 1472"), line
