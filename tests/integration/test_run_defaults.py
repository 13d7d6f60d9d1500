# Inside `ipufs run` the client library and the tools find the run's IPUs
# and daemon with no arguments (IPUFS_MOUNT, IPUFS_CONTROL): docs/client.md's
# example and `ipufs monitor` work there unchanged.
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.compat_harness import Run
from tests.integration.harness import ROOT

pytestmark = pytest.mark.mount


def test_the_client_example_runs_inside_ipufs_run_with_no_arguments(tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "client.md").read_text(), re.S)
    assert example is not None
    script = tmp_path / "example.py"
    script.write_text(example.group(1))
    done = subprocess.run([sys.executable, "-m", "ipufs", "run", "--ipus", "1", "--", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=60)
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "mailbox answer: ['0x4020c', '0x50002', '0x9', '0x0', '0x0']" in out
    assert "exception cause: 8" in out


def test_control_of_dev_inside_ipufs_run_is_the_runs_daemon() -> None:
    code = ("from ipufs.client import Control; import os; "
            "c = Control.of_mount('/dev'); print(c.path == os.environ['IPUFS_CONTROL'], len(c.status()['ipus']))")
    run = Run(["--ipus", "1"], [sys.executable, "-c", code])
    assert run.line() == "True 1"
    assert run.finish()[0] == 0


def test_monitor_inside_ipufs_run_sees_the_attached_process() -> None:
    script = ("import json, os, subprocess, sys; from ipufs.client import Device; d = Device(0); d.attach(); "
              "out = subprocess.run([sys.executable, '-m', 'ipufs', 'monitor', '--json'], capture_output=True, "
              "text=True).stdout; print(json.loads(out)['ipus'][0]['pid'] == os.getpid())")
    run = Run(["--ipus", "1"], [sys.executable, "-c", script])
    assert run.line() == "True"
    assert run.finish()[0] == 0
