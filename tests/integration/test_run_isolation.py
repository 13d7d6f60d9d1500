# `ipufs run` starts its daemon with the installed ipufs, whatever its
# working directory holds: a planted `ipufs` package (a shared /tmp, a cloned
# repository), a checkout of ipufs that is not the installation (no native
# layer built), or a checkout named ipufs beside it; nor does PYTHONPATH
# reach it. `ipufs` itself is the
# console script, which does not import from the working directory: these
# tests start it the same way (`python -I -m ipufs`).
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import ROOT

pytestmark = pytest.mark.mount
TIMEOUT = 60


def plant(where: Path, marker: Path) -> None:
    """An `ipufs` package whose every module appends its name to ``marker``."""
    (where / "ipufs").mkdir(parents=True)
    for name in ("__init__", "__main__", "cli", "run", "native", "_native"):
        (where / "ipufs" / f"{name}.py").write_text(
            f"with open({str(marker)!r}, 'a') as f:\n    f.write({name!r} + '\\n')\n")


def checkout(where: Path) -> None:
    """A checkout of ipufs's sources whose native layer is not built."""
    shutil.copytree(ROOT / "ipufs", where / "ipufs",
                    ignore=shutil.ignore_patterns("__pycache__", "_native*", "*.so"))
    shutil.copytree(ROOT / "native", where / "native", ignore=shutil.ignore_patterns("build", "*.so", "*.o"))
    shutil.copy(ROOT / "pyproject.toml", where)


@pytest.mark.parametrize("layout", ["planted package", "inside a checkout", "beside a checkout named ipufs",
                                    "planted package on PYTHONPATH"])
def test_the_daemon_runs_the_installed_code(tmp_path: Path, layout: str) -> None:
    marker = tmp_path / "planted-code-ran"
    cwd = tmp_path / "cwd"
    env = dict(os.environ)
    if layout == "planted package":
        plant(cwd, marker)
    elif layout == "inside a checkout":
        checkout(cwd)
    elif layout == "beside a checkout named ipufs":
        checkout(cwd / "ipufs")
    else:
        cwd.mkdir()
        plant(tmp_path / "planted", marker)
        env["PYTHONPATH"] = str(tmp_path / "planted")
    out = subprocess.run([sys.executable, "-I", "-m", "ipufs", "run", "--ipus", "1", "--",
                          "sh", "-c", "test -c /dev/ipu0_mem && echo ipu0"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert not marker.exists(), f"planted code ran: {marker.read_text()}"
    assert (out.returncode, out.stdout) == (0, "ipu0\n"), out.stderr
