# The tile debug unit of one IPU: every tile's TDI registers and what they
# do. It owns the debug state of each tile (tile.py), the injection queue
# (DBG_IEXEC: an accepted word waits with TDI_STS.BUSY and retires at the
# executor's next run), the host's naming of tiles (DBG_IOWNER = the
# supervisor of a tile not running makes it a member of the IPU's syncs
# until it starts), breakpoints (breaks.py: built from the supervisor's
# break CSRs and DBG_RBRK/DBG_RBRK_VERT), and where hosts reach the
# registers: the TDI aperture's commands (aperture.py) and, where the
# profile has it, the per-tile block in config space (tile_block.py). It
# acts on the executor only through its Debuggee. Rules: A114
# hover/$DBG_IEXEC.md, $DBG_RBRK.md and R docs/tdi.md, as docs/execution.md
# states them.
from __future__ import annotations

from ipufs.abi.registers import TdiResult
from ipufs.model.debug.aperture import Aperture, RaiseException
from ipufs.model.debug.breaks import Breakpoints, refused_rbrk
from ipufs.model.debug.registers import ERRORS, TdiRefused, TdiRegister, TdiStatus
from ipufs.model.debug.tile import TileDebug
from ipufs.model.debug.tile_block import TileBlock
from ipufs.model.executor.debuggee import Debuggee
from ipufs.model.executor.state import MASK, Status
from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile
from ipufs.model.tiles import TileMemory

#: the debug state of a tile never used
_UNUSED = TileDebug()
_CTXT_STS, _DBG_DATA = int(TdiRegister.CTXT_STS), int(TdiRegister.DBG_DATA)
_RBRK, _RBRK_VERT = int(TdiRegister.DBG_RBRK), int(TdiRegister.DBG_RBRK_VERT)


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
        """What a read of each register index of ``tile`` answers (CTXT_STS
        from the executor once the tile ran)."""
        out = self.debug.get(tile, _UNUSED).values()
        ctxt = self._target.ctxt_sts(tile)
        if ctxt is not None:
            out[_CTXT_STS] = ctxt
        return out

    def read(self, tile: int, reg: int) -> int:
        """A register read (TdiRefused for one that cannot be read)."""
        self.changed.add(tile)  # a refusal sets TDI_STS.INV
        self.tile(tile).check_read(reg)
        return self.values(tile)[reg]

    def write(self, tile: int, reg: int, value: int) -> TdiResult:
        """A register write; returns its TDI_RESULT (TdiRefused for one
        that cannot be written, or a value refused)."""
        debug = self.tile(tile)
        owner = debug.owner
        self.changed.add(tile)
        if reg == TdiRegister.DBG_IEXEC:
            if debug.status & ERRORS:
                return TdiResult.TDI_ERROR  # writes are ignored while an error flag is set
            if debug.status & TdiStatus.BUSY:
                debug.status |= TdiStatus.DBLE  # the last injection has not retired
                return TdiResult.TDI_ERROR
            result = self._inject(tile, owner, value & MASK)
            if result == TdiResult.OK:
                debug.status |= TdiStatus.BUSY
            elif result == TdiResult.NOT_QUIESCENT:
                debug.status |= TdiStatus.CNQ
            else:
                debug.status |= TdiStatus.INV
            return result
        if reg == TdiRegister.DBG_ECLR:
            self._target.release(tile, owner)
        if reg == TdiRegister.DBG_RBRK and (why := refused_rbrk(value)) is not None:
            raise debug.refuse(TdiResult.BAD_VALUE, why)
        debug.write(reg, value)
        if reg == TdiRegister.DBG_IOWNER:
            self._name(tile, value)
        elif reg in (_RBRK, _RBRK_VERT):
            self.breaks_changed(tile)
        return TdiResult.OK

    # --- injections -----------------------------------------------------------------
    def _inject(self, tile: int, context: int, word: int) -> TdiResult:
        """DBG_IEXEC: accept ``word`` for ``context`` of ``tile``, which must
        be inactive or excepted (A114 hover/$DBG_IEXEC.md, R docs/tdi.md)."""
        target = self._target
        if context > target.workers:
            return TdiResult.BAD_VALUE
        if target.status(tile, context) is Status.ACTIVE:
            return TdiResult.NOT_QUIESCENT
        if not target.accepts(context, word):
            return TdiResult.UNSUPPORTED
        self.injections[tile] = (context, word)
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
            result = target.execute(tile, context, word)
            debug = self.tile(tile)
            if result != TdiResult.NOT_QUIESCENT:
                if context == 0:
                    self._unname(tile)  # started (a member while active) or not starting
                if target.status(tile, context) is Status.ACTIVE:
                    debug.excepted.pop(context, None)  # started: its exception is gone
            self.changed.add(tile)
            debug.status &= ~TdiStatus.BUSY
            if result == TdiResult.NOT_QUIESCENT:
                debug.status |= TdiStatus.CNQ
            elif result != TdiResult.OK:
                debug.status |= TdiStatus.INV

    # --- naming ----------------------------------------------------------------------
    def _name(self, tile: int, context: int) -> None:
        """DBG_IOWNER written: naming the supervisor of a tile whose
        supervisor is not active makes the tile a member of the IPU's
        syncs until it starts; naming a worker ends that."""
        if context == 0 and self._target.status(tile, 0) is not Status.ACTIVE:
            self.named.add(tile)
        else:
            self._unname(tile)

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
        return self.tile(tile).registers.get(_DBG_DATA, 0) & MASK

    def set_data(self, tile: int, value: int) -> None:
        self.tile(tile).registers[_DBG_DATA] = value & MASK
        self.changed.add(tile)

    def breaks_changed(self, tile: int) -> None:
        """A break register of ``tile`` was written: what breaks is read
        again and handed to the executor."""
        regs = self.tile(tile).registers
        b = Breakpoints.read(self._target.supervisor_csrs(tile), regs.get(_RBRK, 0), regs.get(_RBRK_VERT, 0))
        self._target.watch(tile, b if b.any() else None)

    # --- exceptions ---------------------------------------------------------------------
    def excepted(self, tile: int, context: int, cause: int) -> None:
        """An exception of ``cause`` was raised for ``context`` of ``tile``:
        DBG_ECSR shows it, and the context stops."""
        if 0 <= tile < self.tiles:
            self.tile(tile).excepted[context] = cause
            self._target.hold(tile, context)
