# Inside `ipufs run` the client library and the tools find the run's IPUs
# and daemon with no arguments (IPUFS_MOUNT, IPUFS_CONTROL): docs/client.md's
# example and `ipufs monitor` work there unchanged. A user on a machine
# with an ipufs service they may use gets its IPUs, with passthrough.
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ipufs.driver.nodes import Ownership
from tests.integration.compat_harness import Run, unprivileged_python
from tests.integration.harness import ROOT, running_daemon, wait_for

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


def test_the_library_opens_the_runs_nodes_by_their_dev_names() -> None:
    """lsof and /proc name a client's files as it opened them: the library
    opens /dev/ipuN, where the run binds the nodes, not the mount's path."""
    script = ("import os; from ipufs.client import Device, Mailbox; d = Device(1); m = Mailbox(1); "
              "print(*(os.readlink(f'/proc/self/fd/{fd}') for fd in (d.fd, d.ex_fd, m.fd)))")
    run = Run(["--ipus", "2"], [sys.executable, "-c", script])
    assert run.line() == "/dev/ipu1 /dev/ipu1_ex /dev/ipu1_mailbox"
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


HOLDER = "\n".join([
    "import os, sys, time",
    "from ipufs.client import Control, Device",
    "d = Device(0)",
    "d.attach()",
    "seen = Control(os.environ['IPUFS_CONTROL']).request('ipu', ipu=0)['attached']['pid']",
    "print(os.getpid(), seen, flush=True)",
    "end = time.monotonic() + 60",
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < end:",
    "    time.sleep(0.05)",
])
TRACE = ("import sys; from ipufs.client import Control; "
         "print(next(iter(Control(sys.argv[1]).trace(kinds=['open'])))['pid'])")
ASK = ("import json, sys; from ipufs.client import Control; "
       "print(json.dumps(Control(sys.argv[1]).request('ipu', ipu=0)['attached']))")


def test_pids_are_told_as_the_asking_process_sees_them(tmp_path: Path) -> None:
    """The command of `ipufs run` has a PID namespace of its own: it hears
    its own pid there, the host its host pid, and a process in a third
    namespace that cannot see it hears null, as the kernel tells pids."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux)")
    done = tmp_path / "done"
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        run = Run(["--dev", str(d.mountpoint)], [sys.executable, "-c", HOLDER, str(done)])
        try:
            own, seen = run.line().split()
            assert own == seen == "2"  # pid 2 of its namespace, under the init of `ipufs run`
            att = d.daemon.driver.attachments.get(0)
            assert att is not None and att.pid != 2
            path = d.daemon.config.control_path
            host = json.loads(subprocess.run([sys.executable, "-c", ASK, path], capture_output=True, text=True,
                                             timeout=30, check=True).stdout)
            assert host["pid"] == att.pid and "pid_note" not in host
            info = subprocess.run([sys.executable, "-m", "ipufs", "info", "-d", "0", "--dev", str(d.mountpoint)],
                                  capture_output=True, text=True, timeout=30)
            assert f"  user process id: {att.pid}\n" in info.stdout, info.stdout + info.stderr
            apart = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", ASK, path],
                                   capture_output=True, text=True, timeout=30)
            assert apart.returncode == 0, apart.stderr
            elsewhere = json.loads(apart.stdout)
            assert elsewhere["pid"] is None and elsewhere["pid_note"] == "outside your PID namespace"
            assert elsewhere["command"] == host["command"]
            apart = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "ipufs",
                                    "info", "-d", "0", "--dev", str(d.mountpoint)],
                                   capture_output=True, text=True, timeout=30)
            assert "  user process id: N/A\n" in apart.stdout, apart.stdout + apart.stderr
            # A trace tells pids the same way: this process is not in that namespace.
            follow = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", TRACE,
                                       path], stdout=subprocess.PIPE, text=True)
            try:
                assert wait_for(lambda: len(d.daemon.tracer.subscribers) == 1, 30)
                os.close(os.open(d.path("ipu0"), os.O_RDONLY))
                assert follow.communicate(timeout=30)[0].split() == ["None"]
            finally:
                follow.kill()
                follow.wait()
        finally:
            done.touch()
            status, err = run.finish()
            run.close()
        assert status == 0, err
