# lseek(SEEK_DATA / SEEK_HOLE) on the sysfs view's attribute files answers
# as real sysfs does: a 4096-byte file without holes (data at any offset
# before 4096, the hole at 4096, ENXIO from 4096 on), checked against the
# host's own sysfs where it has one (docs/sysfs.md).
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ipufs.abi.pci import pci_address
from tests.integration.harness import RunningDaemon

pytestmark = pytest.mark.mount

OFFSETS = (0, 5, 4095, 4096, 10_000)
EXPECTED = {(os.SEEK_DATA, o): o if o < 4096 else errno.ENXIO for o in OFFSETS} | \
           {(os.SEEK_HOLE, o): 4096 if o < 4096 else errno.ENXIO for o in OFFSETS}


def seeks(path: Path) -> dict[tuple[int, int], int]:
    """Each (whence, offset): the offset lseek gives, or its errno."""
    fd = os.open(path, os.O_RDONLY)
    try:
        answers = {}
        for whence, offset in EXPECTED:
            try:
                answers[whence, offset] = os.lseek(fd, offset, whence)
            except OSError as exc:
                answers[whence, offset] = exc.errno or 0
        return answers
    finally:
        os.close(fd)


def test_seek_data_and_hole_on_a_view_attribute_answer_as_sysfs(board: RunningDaemon) -> None:
    attribute = board.mountpoint / "sys/bus/pci/devices" / pci_address(0) / "vendor"
    assert seeks(attribute) == EXPECTED
    host = Path("/sys/class/net/lo/mtu")
    if host.exists():
        assert seeks(host) == EXPECTED  # the host's sysfs agrees
