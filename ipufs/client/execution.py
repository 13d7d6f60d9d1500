# Starting tile programs and reading what they did, as a host does it
# through the tile debug interface (docs/execution.md, docs/debugging.md):
# DBG_IOWNER picks the context (and, for the supervisor, makes the tile one
# its IPU's syncs wait for); a context is stopped with DBG_RBRK (the
# C600's RUN_BREAK), takes injected instructions (a branch to an entry
# gives it a PC; `put $DBG_DATA, $mN` carries $mN out through DBG_DATA),
# and goes on with DBG_ECLR (EXCEPTION_CLEAR); an injection has retired
# when TDI_STS.BUSY clears, and CTXT_STS tells each context's state. A
# debugger moves CSRs (the break channels) through DBG_DATA with injected
# `get`/`put`.
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

from ipufs.abi import tile_code as code
from ipufs.abi.registers import TdiResult


class Device(Protocol):
    """What these sequences need of an opened IPU (ipufs.client.Device is
    one): its TDI registers, through the TDI aperture."""

    def tdi_read_register(self, tile: int, reg: int) -> tuple[TdiResult, int]: ...

    def tdi_write_register(self, tile: int, reg: int, value: int) -> TdiResult: ...


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
    ``entry``, as Graphcore's TDI text and a real host's code do: stop it
    with DBG_RBRK, inject a branch to ``entry``, clear DBG_RBRK and resume
    it with DBG_ECLR (TdiError names the first tile that refused). Every
    tile is named and stopped first, so that a sync of the tiles started
    first waits for the last; returns once every context runs."""
    tiles = list(tiles)
    before, after = code.start_writes(entry, context)
    what = f"start at 0x{entry:x}"
    for tile in tiles:
        _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    for tile in tiles:
        for reg, value in before[1:]:
            _write(device, tile, reg, value, what)
    for tile in tiles:
        retired(device, tile, what)
    for tile in tiles:
        for reg, value in after:
            _write(device, tile, reg, value, what)


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


#: how long stopping a context with DBG_RBRK may take
STOP_TIMEOUT_S = 10.0


@contextmanager
def stopped(device: Device, tile: int, context: int) -> Iterator[None]:
    """``context`` of ``tile`` stopped and named for injections while the
    block runs, as a real host does it: a running or inactive context is
    stopped with its DBG_RBRK bit (an inactive worker takes injections as
    it is) and let go again after (DBG_RBRK as it was, DBG_ECLR); an
    excepted one stays as it is."""
    bit = 1 << context
    result, rbrk = device.tdi_read_register(tile, code.TDI_DBG_RBRK)
    if result != TdiResult.OK:
        raise TdiError(tile, "DBG_RBRK", result)
    state = context_status(device, tile)[context]
    ready = state >= code.CONTEXT_EXCEPTED or state == code.CONTEXT_INACTIVE and context != 0
    _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
    if not ready:
        _write(device, tile, code.TDI_DBG_RBRK, rbrk | bit, "DBG_RBRK")
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while context_status(device, tile)[context] < code.CONTEXT_EXCEPTED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"tile {tile}: context {context} did not stop in {STOP_TIMEOUT_S:g} s")
            time.sleep(_RETIRE_POLL_S)
    try:
        yield
    finally:
        if not ready:
            _write(device, tile, code.TDI_DBG_RBRK, rbrk, "DBG_RBRK")
            if not rbrk & bit:
                _write(device, tile, code.TDI_DBG_ECLR, bit, "DBG_ECLR")


def read_m(device: Device, tile: int, register: int, context: int = 0) -> int:
    """$m``register`` of a context (stopped for the read if it is not)."""
    with stopped(device, tile, context):
        _inject(device, tile, code.put_dbg_data_word(register), f"put $DBG_DATA, $m{register}")
        return debug_data(device, tile)


def read_csr(device: Device, tile: int, csr: int, context: int = 0, scratch: int = 14) -> int:
    """CSR ``csr`` of a context (stopped for the read if it is not),
    through $m``scratch`` (which it overwrites) and DBG_DATA."""
    with stopped(device, tile, context):
        _inject(device, tile, code.get_word(scratch, csr), f"get $m{scratch}, 0x{csr:x}")
        _inject(device, tile, code.put_dbg_data_word(scratch), f"put $DBG_DATA, $m{scratch}")
        return debug_data(device, tile)


def write_csr(device: Device, tile: int, csr: int, value: int, context: int = 0, scratch: int = 14) -> None:
    """Set CSR ``csr`` of a context (stopped for it if it is not) to
    ``value``: DBG_DATA, then `get $m<scratch>, $DBG_DATA` and `put CSR,
    $m<scratch>` injected (the scratch register is overwritten)."""
    get, put = code.get_word(scratch, code.CSR_DBG_DATA), code.put_word(csr, scratch)  # bad numbers: before any write
    with stopped(device, tile, context):
        _write(device, tile, code.TDI_DBG_DATA, value & 0xFFFFFFFF, "DBG_DATA")
        _inject(device, tile, get, f"get $m{scratch}, $DBG_DATA")
        _inject(device, tile, put, f"put 0x{csr:x}, $m{scratch}")


def resume(device: Device, tile: int, context: int = 0, *, at: int | None = None) -> None:
    """Let a context stopped at a break go on where it stopped (DBG_ECLR:
    its first instruction ignores instruction and data breaks), or, with
    ``at``, from there (a branch injected first: breaks apply)."""
    if at is not None:
        _write(device, tile, code.TDI_DBG_IOWNER, context, "DBG_IOWNER")
        _inject(device, tile, code.branch_word(at), f"a branch to 0x{at:x}")
    _write(device, tile, code.TDI_DBG_ECLR, 1 << context, "DBG_ECLR")
