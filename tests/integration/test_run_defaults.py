# Inside `ipufs run` the client library and the tools find the run's IPUs
# and daemon with no arguments (IPUFS_MOUNT, IPUFS_CONTROL): docs/client.md's
# example and `ipufs monitor` work there unchanged. A user on a machine
# with an ipufs service they may use gets its IPUs, with passthrough.
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ipufs.driver.nodes import Ownership
from tests.integration.compat_harness import Run, unprivileged_python
from tests.integration.harness import ROOT, running_daemon

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


MODE = "import os; m = os.environ['IPUFS_MOUNT']; print(m, os.getxattr(m, 'user.ipufs.mode').decode())"  # before any open


def test_a_user_gets_the_services_ipus_with_passthrough_and_own_ones_when_asked() -> None:
    """Where a root daemon's mount serves passthrough and its nodes are
    open to the user, `ipufs run` with no mount options uses its IPUs;
    mount options give the user IPUs of their own, in page-cache mode."""
    shared = Path(tempfile.mkdtemp(prefix="ipufs-svc-", dir="/tmp"))
    shared.chmod(0o755)
    try:
        with running_daemon(shared / "mnt", ipus=1, profile="ipu2", ownership=Ownership(mode=0o666)) as d:
            assert d.daemon.filesystem.mode == "passthrough"
            python = unprivileged_python()[-1]
            run = Run([], [python, "-c", MODE], user=True)
            mount, mode = run.line().split()
            status, err = run.finish()
            assert status == 0, err
            assert mode == "passthrough" and f"using the IPUs of the service at {mount}" in err
            doctor = subprocess.run([*unprivileged_python(), "-m", "ipufs", "doctor", "--json", "--no-probe"],
                                    capture_output=True, text=True, timeout=60, cwd="/")
            said = {f["check"]: f["detail"] for f in json.loads(doctor.stdout)["run"]}
            assert f"uses the IPUs of the service at {mount}, in passthrough mode" in said["ipufs run as a user"]
            own = Run(["--ipus", "1"], [python, "-c", MODE], user=True)
            mount, mode = own.line().split()
            assert own.finish()[0] == 0
            assert mode == "page-cache" and mount != str(d.mountpoint)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
