# The example of docs/client.md runs, as written, against a real mount.
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, running_daemon

pytestmark = pytest.mark.mount


def test_the_client_example_runs(tmp_path: Path) -> None:
    """As the console block runs it, beside a checkout named ipufs (which
    the installed ipufs must win over)."""
    text = (ROOT / "docs" / "client.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S)
    command = re.search(r"```console\n\$ \.venv/bin/python ((?:-\S+ )*)example\.py /run/ipufs\n", text)
    assert example is not None and command is not None
    script = tmp_path / "example.py"
    script.write_text(example.group(1))
    checkout = tmp_path / "ipufs"  # its native/ and ipufs/ directories, as a checkout has them
    for sub in ("ipufs", "native/src", "native/include"):
        (checkout / sub).mkdir(parents=True)
    (checkout / "ipufs" / "__init__.py").write_text("raise ImportError('the checkout, not the installation')\n")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'ipufs'\n")
    with running_daemon(tmp_path / "mnt", ipus=2, profile="ipu2") as d:
        out = subprocess.run([sys.executable, *command.group(1).split(), str(script), str(d.mountpoint)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "tiles: 1472" and lines[1] == "firmware: 2.5.9"
    assert "signal 45 (PCIE_ICU_DR_SIG) for IPU id 7" in lines
    assert "signal 44 (PCIE_IPU_EXCEPTION_SIG) for IPU id 7" in lines
    assert lines[-1] == "exception cause: 8"
