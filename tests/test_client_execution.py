# The client's debugger helpers check their numbers before touching a tile.
from __future__ import annotations

from typing import Any, cast

import pytest

from ipufs.client.execution import write_csr


class Recorder:
    """Stands in for a Device: records every TDI register write."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, int, int]] = []

    def tdi_write_register(self, tile: int, reg: int, value: int) -> int:
        self.writes.append((tile, reg, value))
        return 0


@pytest.mark.parametrize("csr, scratch", [(0x100, 14), (-1, 14), (0x80, 16)])
def test_write_csr_refuses_bad_numbers_before_writing_anything(csr: int, scratch: int) -> None:
    device = Recorder()
    with pytest.raises(ValueError):
        write_csr(cast(Any, device), 0, csr, 1, scratch=scratch)
    assert device.writes == []
