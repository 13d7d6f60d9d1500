# The tile debug unit of an IPU (unit.py) and its parts: the registers
# (registers.py), each tile's state (tile.py), breakpoints (breaks.py),
# the TDI aperture (aperture.py) and the per-tile block in config space
# (tile_block.py). docs/execution.md, docs/registers.md.
from __future__ import annotations

from ipufs.model.debug.registers import TdiRefused, TdiRegister, TdiStatus
from ipufs.model.debug.tile import TileDebug
from ipufs.model.debug.unit import DebugUnit

__all__ = ["DebugUnit", "TdiRefused", "TdiRegister", "TdiStatus", "TileDebug"]
