# The exchange's C state and rules (native/src/executor_exchange.h, in
# ipufs._native), as the native loop and the Python path share them: one
# NativeExchange per IPU, bound to its loop's struct ipufs_x (the tiles'
# arrays and memory), with the fabric's timing. The native loop runs the
# exchange instructions and resolves receivers itself; the Python path
# calls the same C functions here; exchange.py words what they report.
from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from ipufs import _native  # type: ignore[attr-defined]

_lib: Any = _native.lib
_ffi: Any = _native.ffi

#: the exchange instructions (NativeExchange.issue's op)
XX_DELAY, XX_DELAYPIC, XX_DELAYXPIC, XX_SEND, XX_SENDOFF, XX_SENDPIC, XX_SENDPICP = (
    _lib.IPUFS_XX_DELAY, _lib.IPUFS_XX_DELAYPIC, _lib.IPUFS_XX_DELAYXPIC, _lib.IPUFS_XX_SEND, _lib.IPUFS_XX_SENDOFF,
    _lib.IPUFS_XX_SENDPIC, _lib.IPUFS_XX_SENDPICP)
#: what a receiver's resolution gives (NativeExchange.ready)
XX_RESOLVED, XX_BLOCKED, XX_FAILED = _lib.IPUFS_XX_RESOLVED, _lib.IPUFS_XX_BLOCKED, _lib.IPUFS_XX_FAILED
#: the exchange's faults, by name (executor.h)
XX_FAULTS: dict[str, int] = {name: getattr(_lib, f"IPUFS_XX_{name.upper()}") for name in (
    "not_public", "paired_send", "paired_receive", "format", "mux_value", "send_address", "send_fetch",
    "receive_address", "receive_fetch", "receive_read", "no_memory")}


class ExchangeFault(tuple[int, int, int, int, int]):
    """An exchange fault as the C code gives it: kind (XX_FAULTS), address,
    value, PC, event (executor.h, struct ipufs_xx_fault)."""


class Timing(Protocol):
    """The fabric timing the exchange needs (ipufs/model/fabric.py's
    Fabric): time and direction [tiles, tiles], latency [tiles], logical
    [physical tiles]."""

    time: NDArray[np.int16]
    direction: NDArray[np.uint8]
    latency: NDArray[np.int64]
    logical: NDArray[np.int64]


class Stores(Protocol):
    """What is told of the exchange's stores into tile memory (TileMemory)."""

    @property
    def wants_stores(self) -> bool: ...

    def stored(self, tile: int, offset: int, length: int) -> None: ...


class NativeExchange:
    """The exchange of the tiles of loop ``x`` (a ``struct ipufs_x *``):
    ``fabric`` its timing (None: not public; the exchange instructions
    fault, and `delay` only counts), tile memory from ``memory_base`` for
    ``sram`` bytes, ``stored`` told of its stores."""

    def __init__(self, x: Any, tiles: int, fabric: Timing | None, memory_base: int, sram: int,
                 stored: Stores | None) -> None:
        self._x = x
        self.stored = stored
        self._fault = _ffi.new("struct ipufs_xx_fault *")
        self._operands = _ffi.new("uint32_t[]", 6)
        self._log = _ffi.new("uint32_t **")
        #: [tiles]: a receiver is resolved before each issue of the tile
        self.receiving: NDArray[np.uint8] = np.zeros(tiles, np.uint8)
        if fabric is None:
            return
        if fabric.time.shape != (tiles, tiles) or fabric.direction.shape != (tiles, tiles) \
                or fabric.latency.shape != (tiles,) or not (0 <= fabric.logical).all() \
                or not (fabric.logical < tiles).all():
            raise ValueError(f"the fabric's timing does not fit {tiles} tiles")
        self._timing = [np.ascontiguousarray(a, t) for a, t in ((fabric.time, np.int16), (fabric.direction, np.uint8),
                                                                (fabric.latency, np.int64), (fabric.logical, np.int64))]
        pointers = [_ffi.cast(c, _ffi.from_buffer(a)) for c, a in
                    zip(("int16_t *", "uint8_t *", "int64_t *", "int64_t *"), self._timing)]
        state = _lib.ipufs_xx_new(tiles, len(self._timing[3]), *pointers, memory_base, memory_base + sram)
        if state == _ffi.NULL:
            raise MemoryError("the exchange's state")
        self._state = _ffi.gc(state, _lib.ipufs_xx_free)
        x.exchange = self._state
        self.receiving = np.frombuffer(_ffi.buffer(_lib.ipufs_xx_receiving(self._state), tiles), np.uint8)

    def issue(self, tile: int, context: int, op: int, operands: tuple[int, ...], pc: int) -> ExchangeFault | None:
        """Exchange instruction ``op`` (XX_*) of ``tile``'s ``context`` at
        ``pc``: its fault (nothing changed then, but for no_memory, after
        which the exchange's state is not to be trusted), or None."""
        o = self._operands
        for i, v in enumerate(operands):
            o[i] = v & 0xFFFFFFFF
        return self._taken() if _lib.ipufs_xx_issue(self._x, tile, context, op, o, pc, self._fault) else None

    def put(self, tile: int, index: int, value: int, pc: int) -> bool | ExchangeFault:
        """A put to an exchange CSR: whether the exchange made it, or its fault."""
        rc = _lib.ipufs_xx_put(self._x, tile, index, value & 0xFFFFFFFF, pc, self._fault)
        return self._taken() if rc < 0 else bool(rc)

    def logging(self) -> None:
        """Keep the stores for ``stored`` if it wants them (before a run)."""
        _lib.ipufs_xx_log_stores(self._x, int(self.stored is not None and self.stored.wants_stores))

    def ready(self, tile: int) -> int:
        """Resolve receiver ``tile`` up to its count: XX_RESOLVED,
        XX_BLOCKED (it stands still) or XX_FAILED (error())."""
        self.logging()
        rc = int(_lib.ipufs_xx_ready(self._x, tile))
        self.drain_stores()
        return rc

    def error(self, tile: int) -> ExchangeFault | None:
        """The receive error ``tile`` met, once (its receiver goes)."""
        return self._taken() if _lib.ipufs_xx_error(self._x, tile, self._fault) else None

    def release(self) -> int:
        """Let receivers go on whose senders caught up or finished: how many."""
        return int(_lib.ipufs_xx_release(self._x))

    def end_phase(self, tiles: list[int]) -> list[int]:
        """Every word of the phase lands; ``tiles`` count events afresh.
        Returns the receivers that met an error (error())."""
        order = np.array(tiles, np.uint32)
        failed = np.zeros(len(self.receiving), np.uint32)
        self.logging()
        n = _lib.ipufs_xx_end_phase(self._x, _ffi.from_buffer("uint32_t[]", order), len(order),
                                    _ffi.from_buffer("uint32_t[]", failed, require_writable=True))
        self.drain_stores()
        return [int(tile) for tile in failed[:n]]

    def start(self, tile: int) -> None:
        """``tile`` starts afresh: no exchange of its own under way."""
        _lib.ipufs_xx_start(self._x, tile)

    def reset(self) -> None:
        _lib.ipufs_xx_reset(self._x)

    def waiting(self) -> int:
        """Receivers standing still for a sender."""
        return int(_lib.ipufs_xx_waiting(self._x))

    def host(self, tile: int) -> list[int]:
        """The words ``tile`` sent while its multiplexer held a host
        endpoint since it last asked (its host packets), taken."""
        n = _lib.ipufs_xx_host(self._x, tile, self._log)
        return list(_ffi.unpack(self._log[0], n)) if n else []

    def drain_stores(self) -> None:
        """Tell ``stored`` of the exchange's stores since the last call."""
        n = _lib.ipufs_xx_stores(self._x, self._log)
        if n and self.stored is not None and self.stored.wants_stores:
            log = _ffi.unpack(self._log[0], 3 * n)
            for i in range(0, 3 * n, 3):
                self.stored.stored(log[i], log[i + 1], log[i + 2])

    def _taken(self) -> ExchangeFault:
        f = self._fault
        return ExchangeFault((int(f.kind), int(f.address), int(f.value), int(f.pc), int(f.event)))
