# Page-cache mode gives the answers passthrough gives (docs/filesystem.md):
# what the device changed is in the mapping before the call that changed
# it returns, and stores through a mapping reach the device without msync.
# Checked as root and as nobody against a mount with passthrough off.
from __future__ import annotations

import grp
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.driver.nodes import Ownership
from tests.integration.compat_harness import unprivileged_python
from tests.integration.harness import ROOT, RunningDaemon, running_daemon

pytestmark = pytest.mark.mount

CHECKS = {"reset-visible", "mailbox-pwrite", "mailbox-mapped", "mapped-command", "mapped-sync-loop",
          "mapped-then-pread"}


@pytest.fixture
def page_cache_mount() -> Iterator[RunningDaemon]:
    shared = Path(tempfile.mkdtemp(prefix="ipufs-pc-", dir="/tmp"))
    shared.chmod(0o755)
    try:
        # nobody runs client.md's example too, which injects a fault: its group may
        with running_daemon(shared / "mnt", ipus=2, profile="ipu2", passthrough=False,
                            ownership=Ownership(mode=0o666), control_group=grp.getgrnam("nogroup").gr_gid) as d:
            assert d.daemon.filesystem.mode == "page-cache"
            yield d
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _python(user: str) -> list[str]:
    return [sys.executable] if user == "root" else unprivileged_python()


def _public(path: Path) -> str:
    """``path`` as the unprivileged command sees this checkout."""
    from tests.integration.compat_harness import PUBLIC_ROOT
    return str(PUBLIC_ROOT / path.relative_to(ROOT))


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_call_sequences_give_passthrough_answers(page_cache_mount: RunningDaemon, user: str) -> None:
    script = ROOT / "tests" / "integration" / "page_cache_client.py"
    out = subprocess.run([*_python(user), str(script) if user == "root" else _public(script),
                          str(page_cache_mount.mountpoint)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    results = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert set(results) == CHECKS
    assert all(v == "ok" for v in results.values()), results


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_the_client_example_gives_the_documented_mailbox_answer(page_cache_mount: RunningDaemon, user: str,
                                                                tmp_path: Path) -> None:
    text = (ROOT / "docs" / "client.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S)
    documented = re.search(r"^mailbox answer: .*$", text, re.M)
    assert example is not None and documented is not None
    script = page_cache_mount.mountpoint.parent / "example.py"
    script.write_text(example.group(1))
    script.chmod(0o644)
    out = subprocess.run([*_python(user), str(script), str(page_cache_mount.mountpoint)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert documented.group(0) in out.stdout.splitlines()
