# Two mounts linking into one /dev directory: the second leaves the first's
# links alone and says whose they are, not "not ipufs links"; a stranger's
# name is still called one.
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests.integration.harness import running_daemon

pytestmark = pytest.mark.mount


def test_a_second_mount_names_the_first_mounts_links_as_such(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "ipu1_mem").write_text("a real device")
    first, second = tmp_path / "first", tmp_path / "second"
    with running_daemon(first, ipus=1, profile="ipu1", link_dev=True, dev_dir=str(dev)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ipufs.daemon.devlinks"), \
                running_daemon(second, ipus=2, profile="ipu1", link_dev=True, dev_dir=str(dev)):
            assert os.readlink(dev / "ipu0") == str(first / "ipu0")  # the first's, untouched
            assert os.readlink(dev / "ipu1") == str(second / "ipu1")
        warnings = [r.getMessage() for r in caplog.records if r.name == "ipufs.daemon.devlinks"]
        assert warnings == [
            f"left 4 names in {dev} to the ipufs mount at {first}, whose links they are (this mount's nodes "
            f"are in {second}): ipu0, ipu0_ex, ipu0_mailbox, ipu0_mem",
            f"left 1 name in {dev} untouched (not ipufs links): ipu1_mem"]
