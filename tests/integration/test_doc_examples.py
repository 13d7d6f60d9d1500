# Every shell example in docs/ runs as written, so that the docs stay true:
# the ```sh, ```console, ```shell and ```bash blocks of docs/**/*.md,
# wherever they live. A console block's `$ ` lines are commands and the
# lines after each its output (stdout and stderr as a terminal shows them);
# a `...` stands for any text (a line of its own: any lines). An sh block's
# lines (but comments) are commands that must succeed. Each doc's examples run in order,
# against a fresh mount of the default board (4 x ipu2, as `sudo ./dev
# run` mounts at /run/ipufs), rewritten only in these mechanical ways:
#   - /run/ipufs in a command is the test mount, and the test mount in the
#     output is /run/ipufs; the checkout's path in the output is /srv/ipufs;
#   - `ipufs` is this checkout's (`python -m ipufs`), and `sudo ` is left
#     out (the tests run as root);
#   - commands run in a directory holding the shipped examples/, with
#     $IPUFS_MOUNT set to the test mount (for tools' default --dev).
# An example that cannot run here, or whose output cannot match here, is
# in NOT_RUN or OUTPUT_VARIES below, with the reason: a reviewed list.
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, running_daemon

pytestmark = pytest.mark.mount

SHELLS = ("sh", "console", "shell", "bash")
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)

#: Examples (by their command, as written) that cannot run in this test.
NOT_RUN: dict[str, str] = {
    ".venv/bin/python -P example.py /run/ipufs":
        "example.py is the Python block above it: tests/integration/test_client_doc.py runs them together",
    "ipufs run [--ipus N] [--profile P] [mount options] -- COMMAND [ARGS...]": "a synopsis, not a command",
    "ipufs run --dev /run/ipufs -- COMMAND [ARGS...]      # use an existing mount": "a synopsis, not a command",
    "ipufs run -- ./my-ipu-tool": "./my-ipu-tool stands for the user's program",
    "sudo ipufs run -- ./my-ipu-tool --its-options; echo $?   # the tool's own status":
        "./my-ipu-tool stands for the user's program",
    "ipufs docker -- graphcore/toolz": "needs a Docker daemon and its image store",
    "ipufs trace -d 0      # while a client attaches, sets its id, writes SCRATCH, asks the ICU, syncs":
        "follows the trace until interrupted, and shows what another client does meanwhile",
    "sudo ipufs device-plugin --dev /run/ipufs": "needs a kubelet (a Kubernetes node) to register with",
    "pip install 'ipufs[prometheus]'         # prometheus_client, PyYAML, bcrypt": "installs from the network",
    "ipufs exporter --dev /run/ipufs --listen 127.0.0.1:9842": "serves until stopped, on a fixed TCP port",
    "curl -s localhost:9842/metrics | grep '^ipufs_ipu_power_watts'":
        "needs the exporter above, serving on its fixed port",
    "sudo ./dev run                       # 4 x ipu2 at /run/ipufs, linked at /dev/ipu*":
        "mounts at /run/ipufs for the whole machine and serves until Ctrl-C",
    "sudo groupadd --system ipu          # once: --group names a group that must exist":
        "adds a group to the machine",
    "sudo ./dev run /mnt/ipu --ipus 2 --profile ipu1 --group ipu --mode 0660":
        "mounts at /mnt/ipu for the whole machine, for a group the line above adds",
    "getfattr -d /run/ipufs": "getfattr (the attr package) is not installed on the test machines",
    "sudo ./dev test            # mypy, then pytest: unit, property and mount tests":
        "runs the whole suite, this test among it",
    "sudo ./dev test -k golden  # any pytest options": "runs a part of the suite from inside it",
    "sudo ./dev install          # links /usr/local/bin/ipufs to this checkout's ipufs,":
        "installs ipufs and its units on the machine",
    "sudo systemctl enable --now ipufs": "needs systemd and the unit installed",
    "systemctl status ipufs          # STATUS= line: \"4 IPUs at /run/ipufs (passthrough)\"":
        "needs systemd and the service running",
    "echo Y > /sys/module/fuse/parameters/enable_uring                # now, until reboot":
        "changes a module parameter of the whole machine",
    "echo \"options fuse enable_uring=1\" > /etc/modprobe.d/ipufs-uring.conf  # from the next load of the module":
        "changes the machine's module configuration",
    "ipufs ls                   # the daemon was killed": "needs the daemon killed under the mount",
}

#: Examples that run here, whose output is not compared, and why.
OUTPUT_VARIES: dict[str, str] = {
    "ipufs doctor --no-probe": "says what this machine allows (privileges, kernel, /dev/fuse's mode)",
    "sudo .venv/bin/ipufs doctor": "says what this machine allows (privileges, kernel, /dev/fuse's mode)",
    "ipufs doctor                    # the mode in force and why": "says what this machine allows",
    "ipufs info -d 1            # a process is attached to IPU 1, and runs a loop on half its tiles":
        "shows a process attached and running, which the example does not start",
    "ipufs monitor               # a process on IPU 1 runs a loop on half its tiles":
        "shows a process attached and running, which the example does not start",
    "ipufs umount /tmp": "names every ipufs mount of the machine, other tests' among them",
    "ipufs docker --engine podman --device-id 4 --echo -- -ti graphcore/tools gc-inventory":
        "podman gets CDI names when the mount's CDI spec is in /etc/cdi (docker.md), bind mounts otherwise",
    "ipufs docker --device-id 9 -- graphcore/tools":
        "names the directory of the nodes, /dev where ./dev run linked them",
    "ipufs run --ipus 2 -- udevadm info /dev/ipu0": "USEC_INITIALIZED is when the node appeared",
}


@dataclass(frozen=True)
class Example:
    doc: str  # relative to the checkout
    line: int
    command: str  # as written
    output: tuple[str, ...] | None  # what a console block shows after it; None: an sh block


def examples() -> list[Example]:
    out: list[Example] = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text()
        for block in _BLOCK.finditer(text):
            if block.group(1) not in SHELLS:
                continue
            first = text.count("\n", 0, block.start(2)) + 1
            lines = block.group(2).splitlines()
            doc = str(path.relative_to(ROOT))
            if block.group(1) == "console":
                out += _console(doc, first, lines)
            else:
                out += [Example(doc, first + i, line.strip(), None) for i, line in enumerate(lines)
                        if line.strip() and not line.lstrip().startswith("#")]  # a comment is no command
    return out


def _console(doc: str, first: int, lines: list[str]) -> list[Example]:
    out: list[Example] = []
    command, at, shown = None, 0, []
    for i, line in enumerate([*lines, "$ "]):
        if line.startswith("$ "):
            if command is not None:
                out.append(Example(doc, first + at, command, tuple(shown)))
            command, at, shown = line[2:].strip(), i, []
        else:
            shown.append(line)
    return [e for e in out if e.command]


EXAMPLES = examples()
DOCS = sorted({e.doc for e in EXAMPLES if e.command not in NOT_RUN})


def test_every_example_runs_or_says_why_not() -> None:
    commands = {e.command for e in EXAMPLES}
    assert len(EXAMPLES) > 40
    assert sorted(set(NOT_RUN) - commands) == [], "listed, but no doc shows it any more"
    assert sorted(set(OUTPUT_VARIES) - commands) == [], "listed, but no doc shows it any more"
    assert not set(NOT_RUN) & set(OUTPUT_VARIES)


def _matches(shown: tuple[str, ...], got: list[str]) -> bool:
    """Whether ``got`` is what ``shown`` shows: a `...` line is any lines,
    a `...` in a line any text."""
    pattern = "".join(".*" if line.strip() == "..." else
                      ".*".join(re.escape(part) for part in line.rstrip().split("...")) + "\n"
                      for line in _trimmed(list(shown)))
    return re.fullmatch(pattern, "".join(f"{line}\n" for line in _trimmed(got)), re.S) is not None


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.parametrize("doc", DOCS)
def test_the_examples_of_a_doc_run_as_written(doc: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "ipufs").write_text(f"#!/bin/sh\nexec {sys.executable} -m ipufs \"$@\"\n")
    (shim / "ipufs").chmod(0o755)
    with running_daemon(tmp_path / "mnt", ipus=4) as board:
        mount = str(board.mountpoint)
        env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", IPUFS_MOUNT=mount)
        failures = []
        for example in (e for e in EXAMPLES if e.doc == doc and e.command not in NOT_RUN):
            command = re.sub(r"(^|;\s*)sudo ", r"\1", example.command).replace("/run/ipufs", mount)
            done = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=300)
            got = done.stdout.replace(mount, "/run/ipufs").replace(str(ROOT), "/srv/ipufs").splitlines()
            where = f"{example.doc}:{example.line}: $ {example.command}"
            if example.output is None or not _trimmed(list(example.output)):
                if done.returncode != 0:
                    failures.append(f"{where}\n  exit status {done.returncode}:\n" + "\n".join(got))
            elif example.command not in OUTPUT_VARIES and not _matches(example.output, got):
                failures.append(f"{where}\n  shows:\n" + "\n".join(example.output) + "\n  gives:\n" + "\n".join(got))
    assert not failures, "\n\n".join(failures)
