# Starting tile programs and reading what they did, as a host does it
# through the tile debug interface (docs/execution.md): DBG_IOWNER picks
# the context, a branch to the entry written to DBG_IEXEC starts it,
# `put $DBG_DATA, $mN` injected into a stopped context carries $mN out
# through DBG_DATA, and CTXT_STS tells each context's state.
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ipufs.abi import tile_code as code
from ipufs.abi.registers import TdiResult

if TYPE_CHECKING:
    from ipufs.client.device import Device


class TdiError(OSError):
    """A TDI command refused (the result says why: docs/registers.md)."""

    def __init__(self, tile: int, what: str, result: TdiResult) -> None:
        super().__init__(f"tile {tile}: {what}: {result.name}")
        self.tile = tile
        self.result = result


def _write(device: Device, tile: int, reg: int, value: int, what: str) -> None:
    result = device.tdi_write_register(tile, reg, value)
    if result != TdiResult.OK:
        raise TdiError(tile, what, result)


def start(device: Device, entry: int, tiles: Iterable[int], context: int = 0) -> None:
    """Start ``context`` (0: the supervisor) of each of ``tiles`` at
    ``entry``; the context must be inactive or excepted (TdiError names
    the first tile that refused)."""
    word = code.branch_word(entry)
    for tile in tiles:
        _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
        _write(device, tile, code.TDI_DBG_IEXEC, word, f"start at 0x{entry:x}")


def context_status(device: Device, tile: int) -> list[int]:
    """The state of each context of ``tile`` (tile_code.CONTEXT_*)."""
    result, value = device.tdi_read_register(tile, code.TDI_CTXT_STS)
    if result != TdiResult.OK:
        raise TdiError(tile, "CTXT_STS", result)
    return code.context_states(value)


def debug_data(device: Device, tile: int) -> int:
    """DBG_DATA of ``tile``: what its code last put there."""
    result, value = device.tdi_read_register(tile, code.TDI_DBG_DATA)
    if result != TdiResult.OK:
        raise TdiError(tile, "DBG_DATA", result)
    return value & 0xFFFFFFFF


def read_m(device: Device, tile: int, register: int, context: int = 0) -> int:
    """$m``register`` of a stopped (inactive or excepted) context."""
    _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    _write(device, tile, code.TDI_DBG_IEXEC, code.put_dbg_data_word(register), f"put $DBG_DATA, $m{register}")
    return debug_data(device, tile)
