# The tile debug unit of one IPU: every tile's TDI registers and what they
# do, one row each in REGISTERS. It owns the debug state of each tile
# (tile.py), the injection queue (DBG_IEXEC: an accepted word waits with
# TDI_STS.BUSY and retires at the executor's next run), the host's naming
# of tiles (DBG_IOWNER = the supervisor of a tile not running makes it a
# member of the IPU's syncs until it runs), breakpoints (breaks.py: built
# from the supervisor's break CSRs, DBG_RBRK, DBG_RBRK_VERT and
# DBG_ECSR.BOS), and where hosts reach the registers: the TDI aperture's
# commands (aperture.py) and, where the profile has it, the per-tile block
# in config space (tile_block.py). It acts on the executor only through
# its Debuggee. Rules: A114 hover/$DBG_IEXEC.md, R docs/tdi.md, and a
# runtime that drives a real C600 (osmarks/ipu-stack, crates/ipu-driver/
# src/lib.rs: RUN_BREAK and EXCEPTION_CLEAR are masks of contexts, a
# stopped context resumes at its PC), as docs/debugging.md states them.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ipufs.abi.registers import ExceptionCause, TdiResult
from ipufs.model.debug.aperture import Aperture, RaiseException
from ipufs.model.debug.breaks import RBRK_EN, Breakpoints
from ipufs.model.debug.registers import CONTEXTS, ERRORS, TdiRegister as R, TdiStatus
from ipufs.model.debug.tile import TileDebug, refused_access
from ipufs.model.debug.tile_block import TileBlock
from ipufs.model.executor.csr import EXCHANGE_CTL, INCOMING_DCOUNT
from ipufs.model.executor.debuggee import Debuggee
from ipufs.model.executor.state import MASK, Etype, Status
from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile
from ipufs.model.tiles import TileMemory

#: the ETYPE a context shows when an exception of this cause is raised for
#: it from outside its program (the fault API, the TDI's memory commands);
#: as a fault of the same cause would (docs/debugging.md), INVALID_OP else
_OUTSIDE_ETYPES: dict[int, Etype] = {
    ExceptionCause.MISALIGNED: Etype.INVALID_ADDR, ExceptionCause.PARITY: Etype.MEMERR,
    ExceptionCause.INVALID_ADDRESS: Etype.INVALID_ADDR, ExceptionCause.INVALID_INSTRUCTION: Etype.INVALID_INSTR,
    ExceptionCause.SYNC: Etype.EXERR, ExceptionCause.BREAKPOINT: Etype.RBRK,
    ExceptionCause.NOT_EXECUTABLE: Etype.INVALID_INSTR, ExceptionCause.INVALID_PC: Etype.INVALID_PC,
    ExceptionCause.FLOATING_POINT: Etype.FP, ExceptionCause.EXCHANGE: Etype.EXERR,
}

Read = Callable[["DebugUnit", int, int], int]
Write = Callable[["DebugUnit", int, int, int], TdiResult]


@dataclass(frozen=True, slots=True)
class Register:
    """What a read of a TDI register answers and what a write does (None:
    write-only, or read-only); ``source`` says where the rule comes from."""

    read: Read | None
    write: Write | None
    source: str


class DebugUnit:
    """The TDI of one IPU: its registers in ``config`` space, acting on
    tile ``memory`` and on the executor it is bound to; ``raise_exception``
    is the IPU's."""

    def __init__(self, profile: Profile, config: BarMemory, memory: TileMemory,
                 raise_exception: RaiseException) -> None:
        self.tiles = profile.tiles
        self.target: Debuggee | None = None
        #: tile -> its debug state, created on first use
        self.debug: dict[int, TileDebug] = {}
        #: tile -> (context, word): injections accepted (TDI_STS.BUSY), to retire at the next run
        self.injections: dict[int, tuple[int, int]] = {}
        #: tiles the host named and has not started: members of the IPU's syncs (docs/execution.md)
        self.named: set[int] = set()
        #: tiles whose registers may show something new since they were last published
        self.changed: set[int] = set()
        #: the per-tile registers in config space, where the profile has them
        self.block = None if profile.tdi_tile_base is None else TileBlock(profile, config, self)
        #: the TDI command aperture
        self.aperture = Aperture(config, memory, self, raise_exception)

    def bind(self, target: Debuggee) -> None:
        self.target = target

    @property
    def _target(self) -> Debuggee:
        assert self.target is not None, "the debug unit acts on an executor bound to it"
        return self.target

    def tile(self, tile: int) -> TileDebug:
        """``tile``'s debug state (created on first use)."""
        debug = self.debug.get(tile)
        if debug is None:
            debug = self.debug[tile] = TileDebug()
        return debug

    def reset(self) -> dict[int, TileDebug]:
        """Every register reads 0 again; returns the state dropped (to be
        freed later, as the executor frees its own)."""
        dropped, self.debug = self.debug, {}
        self.injections.clear()
        self.named.clear()
        self.changed.clear()
        if self.block is not None:
            self.block.clear()
        self.aperture.clear()
        return dropped

    # --- reads and writes --------------------------------------------------------
    def values(self, tile: int) -> list[int]:
        """What a read of each register index of ``tile`` answers (0 for
        the write-only ones and the indices the TDI does not have)."""
        out = [0] * 16
        for reg, rule in REGISTERS.items():
            if rule.read is not None:
                out[reg] = rule.read(self, tile, reg) & MASK
        return out

    def read(self, tile: int, reg: int) -> int:
        """A register read (TdiRefused for one that cannot be read)."""
        self.changed.add(tile)  # a refusal sets TDI_STS.INV
        rule = _BY_INDEX.get(reg)
        if rule is None or rule.read is None:
            raise refused_access(self.tile(tile), reg, "read")
        return rule.read(self, tile, reg) & MASK

    def write(self, tile: int, reg: int, value: int) -> TdiResult:
        """A register write; returns its TDI_RESULT (TdiRefused for one
        that cannot be written, or a value refused)."""
        self.changed.add(tile)
        rule = _BY_INDEX.get(reg)
        if rule is None or rule.write is None:
            raise refused_access(self.tile(tile), reg, "written")
        return rule.write(self, tile, reg, value & MASK)

    # --- the rules -------------------------------------------------------------------
    def _held(self, tile: int, reg: int) -> int:
        debug = self.debug.get(tile)
        return 0 if debug is None else debug.held(reg)

    def _hold(self, tile: int, reg: int, value: int) -> TdiResult:
        self.tile(tile).registers[reg] = value
        return TdiResult.OK

    def _hold_break(self, tile: int, reg: int, value: int) -> TdiResult:
        self._hold(tile, reg, value)
        self.breaks_changed(tile)
        return TdiResult.OK

    def _context_status(self, tile: int, reg: int) -> int:
        return self._target.ctxt_sts(tile) or 0

    def _status(self, tile: int, reg: int) -> int:
        debug = self.debug.get(tile)
        return 0 if debug is None else debug.status

    def _run_break(self, tile: int, reg: int, value: int) -> TdiResult:
        """DBG_RBRK (the C600's RUN_BREAK): each context whose EN bit is set
        stops before its next instruction, an inactive one too, and reads
        excepted (RBRK); while the bit stays set, a context resumed retires
        one instruction and stops again (retirement break)."""
        self._hold_break(tile, reg, value)
        b = self._breakpoints(tile)
        for context in range(min(CONTEXTS, self._target.workers + 1)):
            if value & RBRK_EN & 1 << context:
                self._target.hold(tile, context, Etype.RBRK, when=b.retirement)
        return TdiResult.OK

    def _owner(self, tile: int, reg: int, value: int) -> TdiResult:
        """DBG_IOWNER: the context injections go to; naming the supervisor
        of a tile whose supervisor is not active makes the tile a member of
        the IPU's syncs until it is; naming a worker ends that."""
        debug = self.tile(tile)
        if not 0 <= value < CONTEXTS:
            raise debug.refuse(TdiResult.BAD_VALUE, f"DBG_IOWNER {value}: contexts are 0..6")
        debug.registers[reg] = value
        if value == 0 and self._target.status(tile, 0) is not Status.ACTIVE:
            self.named.add(tile)
        else:
            self._unname(tile)
        return TdiResult.OK

    def _exception_clear(self, tile: int, reg: int, value: int) -> TdiResult:
        """DBG_ECLR (the C600's EXCEPTION_CLEAR): each excepted context
        whose bit is set goes on where it stopped, or back to inactive
        (Debuggee.release)."""
        for context in range(min(CONTEXTS, self._target.workers + 1)):
            if value & 1 << context and self._target.status(tile, context).excepted:
                self._target.release(tile, context)
                if context == 0:
                    self._unname(tile)  # running, or inactive again: a member only while running
        return TdiResult.OK

    def _clear_flags(self, tile: int, reg: int, value: int) -> TdiResult:
        self.tile(tile).clear_flags(value)
        return TdiResult.OK

    def _data(self, tile: int, reg: int, value: int) -> TdiResult:
        return self._hold(tile, reg, value & MASK)  # 32 bits (the C600's DATA)

    # --- injections -----------------------------------------------------------------
    def _inject(self, tile: int, reg: int, word: int) -> TdiResult:
        """DBG_IEXEC: queue ``word`` for the DBG_IOWNER context, which must be
        quiescent; the supervisor excepted, or quiescent with RBRK enabled
        for it (A114 hover/$DBG_IEXEC.md)."""
        debug = self.tile(tile)
        if debug.status & ERRORS:
            return TdiResult.TDI_ERROR  # writes are ignored while an error flag is set
        if debug.status & TdiStatus.BUSY:
            debug.status |= TdiStatus.DBLE  # the last injection has not retired
            return TdiResult.TDI_ERROR
        target, context = self._target, debug.owner
        if context > target.workers:
            debug.status |= TdiStatus.INV
            return TdiResult.BAD_VALUE
        status = target.status(tile, context)
        if context == 0:
            ready = status.excepted or status is Status.INACTIVE and bool(debug.held(R.DBG_RBRK) & 1)
        else:
            ready = status is not Status.ACTIVE
        if not ready:
            debug.status |= TdiStatus.CNQ
            return TdiResult.NOT_QUIESCENT
        if not target.accepts(context, word):
            debug.status |= TdiStatus.INV
            return TdiResult.UNSUPPORTED
        self.injections[tile] = (context, word)
        debug.status |= TdiStatus.BUSY
        target.wake()
        return TdiResult.OK

    def pending(self) -> bool:
        return bool(self.injections)

    def retire(self) -> None:
        """Execute the accepted injections: each tile's TDI_STS.BUSY clears,
        with CNQ if its context became active meanwhile, INV if the
        instruction faulted on an excepted context."""
        target = self._target
        pending, self.injections = self.injections, {}
        for tile, (context, word) in sorted(pending.items()):
            debug = self.tile(tile)
            result = target.execute(tile, context, word, rbrk=bool(debug.held(R.DBG_RBRK) & 1 << context))
            self.changed.add(tile)
            debug.status &= ~TdiStatus.BUSY
            if result == TdiResult.NOT_QUIESCENT:
                debug.status |= TdiStatus.CNQ
            elif result != TdiResult.OK:
                debug.status |= TdiStatus.INV

    def _unname(self, tile: int) -> None:
        if tile in self.named:
            self.named.discard(tile)
            self._target.wake()  # a sync the tile held back may complete

    # --- what the executor asks (executor/ports.py: Debugger) ---------------------------
    def publish(self) -> None:
        """Show the changed tiles' registers where hosts read them."""
        if self.block is not None:
            self.block.publish()
        else:
            self.changed.clear()

    def data(self, tile: int) -> int:
        return self._held(tile, R.DBG_DATA)

    def set_data(self, tile: int, value: int) -> None:
        self.tile(tile).registers[R.DBG_DATA] = value & MASK
        self.changed.add(tile)

    def _breakpoints(self, tile: int) -> Breakpoints:
        return Breakpoints.read(self._target.supervisor_csrs(tile), self._held(tile, R.DBG_RBRK),
                                self._held(tile, R.DBG_RBRK_VERT), self._held(tile, R.DBG_ECSR))

    def breaks_changed(self, tile: int) -> None:
        """A break register of ``tile`` was written: what breaks is read
        again and handed to the executor."""
        b = self._breakpoints(tile)
        self._target.watch(tile, b if b.any() else None)

    # --- exceptions ---------------------------------------------------------------------
    def excepted(self, tile: int, context: int, cause: int) -> None:
        """An exception of ``cause`` was raised for ``context`` of ``tile``:
        the context stops (an exception its own program raised has stopped
        it already)."""
        if 0 <= tile < self.tiles:
            self._target.hold(tile, context, _OUTSIDE_ETYPES.get(cause, Etype.INVALID_OP))


_HELD = Register(DebugUnit._held, DebugUnit._hold, "R docs/tdi.md (a register that holds what is written)")
#: every TDI register: what a read answers, what a write does. A register
#: not here is refused both ways (BAD_REGISTER, TDI_STS.INV).
REGISTERS: dict[R, Register] = {
    R.CTXT_STS: Register(DebugUnit._context_status, None,
                         "R TileCtxtStatus; the C600's CONTEXT_STATUS, ERERR in bits 27..29 (osmarks/ipu-stack)"),
    R.DBG_RBRK: Register(DebugUnit._held, DebugUnit._run_break,
                         "A114 hover/$DBG_RBRK.md; the C600's RUN_BREAK: a mask that stops contexts"),
    R.DBG_RBRK_VERT: Register(DebugUnit._held, DebugUnit._hold_break, "A114 hover/$DBG_RBRK_VERT.md"),
    R.DBG_IEXEC: Register(None, DebugUnit._inject, "A114 hover/$DBG_IEXEC.md"),
    R.DBG_IOWNER: Register(DebugUnit._held, DebugUnit._owner, "A114 hover/$DBG_IEXEC.md; naming: ours"),
    R.DBG_ECSR: Register(DebugUnit._held, DebugUnit._hold_break,
                         "R CSR_S_DBG_ECSR (EPCM, CTXT, BOS[5]); the C600's EXCEPTION_STATE.BREAK_ON_SYNC"),
    R.DBG_ECLR: Register(None, DebugUnit._exception_clear,
                         "R CSR_S_DBG_ECLR (CLR[6:0]); the C600's EXCEPTION_CLEAR: resumes at the PC"),
    R.DBG_DATA: Register(DebugUnit._held, DebugUnit._data, "A114 hover/$DBG_DATA.md; 32 bits (the C600's DATA)"),
    R.TDI_STS: Register(DebugUnit._status, None, "R docs/tdi.md (CNQ, INV, DBLE, BUSY)"),
    R.TDI_CLR: Register(None, DebugUnit._clear_flags, "R docs/tdi.md"),
    R.INCOMING_DCOUNT: Register(lambda unit, tile, reg: unit._target.supervisor_csr(tile, INCOMING_DCOUNT), None,
                                "the C600's INCOMING_DCOUNT: the supervisor's $INCOMING_DCOUNT"),
    R.EXCHANGE_CTL: Register(lambda unit, tile, reg: unit._target.supervisor_csr(tile, EXCHANGE_CTL), None,
                             "the C600's EXCHANGE_CONTROL: the supervisor's $EXCHANGE_CTL"),
    R.TDI_CTL: _HELD,
}
_BY_INDEX: dict[int, Register] = {int(reg): rule for reg, rule in REGISTERS.items()}
