# Starting tile programs and reading what they did, as a host does it
# through the tile debug interface (docs/execution.md): DBG_IOWNER picks
# the context (and, for the supervisor, makes the tile one its IPU's syncs
# wait for), a branch to the entry written to DBG_IEXEC starts it, `put
# $DBG_DATA, $mN` injected into a stopped context carries $mN out through
# DBG_DATA; an injection has retired when TDI_STS.BUSY clears, and
# CTXT_STS tells each context's state. A debugger moves CSRs (the break
# channels) through DBG_DATA with injected `get`/`put`, and resumes a
# stopped context with a branch to where it stopped (docs/debugging.md,
# "Breakpoints").
from __future__ import annotations

import time
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


#: how long an injection may stay busy before retired() gives up
RETIRE_TIMEOUT_S = 10.0
_RETIRE_POLL_S = 0.0002


def retired(device: Device, tile: int, what: str, timeout: float = RETIRE_TIMEOUT_S) -> None:
    """Wait until the injection into ``tile`` has retired (TDI_STS.BUSY
    clear); TdiError (TDI_ERROR) if it left an error flag (CNQ: the context
    became active first; INV: it faulted on an excepted context),
    TimeoutError if it stays busy."""
    deadline = time.monotonic() + timeout
    while True:
        result, status = device.tdi_read_register(tile, code.TDI_TDI_STS)
        if result != TdiResult.OK:
            raise TdiError(tile, "TDI_STS", result)
        if not status & code.TDI_STS_BUSY:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"tile {tile}: {what}: still busy after {timeout:g} s")
        time.sleep(_RETIRE_POLL_S)
    if status & (code.TDI_STS_CNQ | code.TDI_STS_INV | code.TDI_STS_DBLE):
        raise TdiError(tile, f"{what} (TDI_STS 0x{status:x})", TdiResult.TDI_ERROR)


def start(device: Device, entry: int, tiles: Iterable[int], context: int = 0) -> None:
    """Start ``context`` (0: the supervisor) of each of ``tiles`` at
    ``entry``; the context must be inactive or excepted (TdiError names
    the first tile that refused). Every tile is named first, so that a
    sync of the tiles started first waits for the last; returns once every
    start has retired."""
    tiles = list(tiles)
    word = code.branch_word(entry)
    what = f"start at 0x{entry:x}"
    for tile in tiles:
        _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    for tile in tiles:
        _write(device, tile, code.TDI_DBG_IEXEC, word, what)
    for tile in tiles:
        retired(device, tile, what)


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


def _inject(device: Device, tile: int, word: int, what: str) -> None:
    _write(device, tile, code.TDI_DBG_IEXEC, word, what)
    retired(device, tile, what)


def read_m(device: Device, tile: int, register: int, context: int = 0) -> int:
    """$m``register`` of a stopped (inactive or excepted) context."""
    _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    _inject(device, tile, code.put_dbg_data_word(register), f"put $DBG_DATA, $m{register}")
    return debug_data(device, tile)


def read_csr(device: Device, tile: int, csr: int, context: int = 0, scratch: int = 14) -> int:
    """CSR ``csr`` of a stopped context, through $m``scratch`` (which it
    overwrites) and DBG_DATA."""
    _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    _inject(device, tile, code.get_word(scratch, csr), f"get $m{scratch}, 0x{csr:x}")
    return read_m(device, tile, scratch, context)


def write_csr(device: Device, tile: int, csr: int, value: int, context: int = 0, scratch: int = 14) -> None:
    """Set CSR ``csr`` of a stopped context to ``value``: DBG_DATA, then
    `get $m<scratch>, $DBG_DATA` and `put CSR, $m<scratch>` injected
    (the scratch register is overwritten)."""
    get, put = code.get_word(scratch, code.CSR_DBG_DATA), code.put_word(csr, scratch)  # bad numbers: before any write
    _write(device, tile, code.TDI_DBG_DATA, value & 0xFFFFFFFF, "DBG_DATA")
    _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    _inject(device, tile, get, f"get $m{scratch}, $DBG_DATA")
    _inject(device, tile, put, f"put 0x{csr:x}, $m{scratch}")


def resume(device: Device, tile: int, pc: int, context: int = 0) -> None:
    """Let a context stopped at a break go on from ``pc`` (where it
    stopped): a branch there, injected; its first instruction ignores
    instruction and data breaks."""
    _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    _inject(device, tile, code.branch_word(pc), f"resume at 0x{pc:x}")
