# The executor of one IPU: fetches, decodes (the ISA table's decoder) and
# executes tile code, one turn at a time per tile, contexts round-robin;
# resolves syncs (LOCAL within a tile; INTERNAL, and external zones through
# the IPU's host sync machinery, over the IPU's members: the running tiles
# and those the host has named); turns faults and breakpoints (breaks.py)
# into tile exceptions (EXC_* registers, signal 44); and takes instructions
# injected through the tile debug interface, which retire at the start of
# the next run(). Pure: no I/O, no clocks; the daemon calls run() in
# bounded slices. Turns run in the native loop (native.py) where the
# semantic rules name a native form, on the same state, and here otherwise.
# docs/execution.md.
from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ipufs.abi.registers import SYNC_ERROR, ExceptionCause, TdiResult
from ipufs.model.executor import breaks, csr, native, system
from ipufs.model.executor.rule import Rule
from ipufs.model.executor.semantics import SEMANTICS, why_not
from ipufs.model.executor.state import MASK, WAIT_CODES, Context, Etype, Status, TileFault, TileState, Wait
from ipufs.model.isa import Arch, Bundle, Context as Contexts, Decoder, Group, Instruction
from ipufs.model.tdi import TdiRegister, TdiStatus, TileDebug

if TYPE_CHECKING:
    from ipufs.model.ipu import Ipu

#: tile exceptions of faults and what EXC_CAUSE they show, as docs/execution.md maps them
_PARITY_FAULT = (Etype.MEMERR, ExceptionCause.PARITY)
#: the breakpoints' ETYPEs: the context stops where a resume can go on (a running rpt stays)
_BREAKS = frozenset({Etype.IBRK, Etype.DBRK, Etype.RBRK})
#: wait as the arrays hold it
_INTERNAL, _EXTERNAL = WAIT_CODES[Wait.INTERNAL], WAIT_CODES[Wait.EXTERNAL]
_MAX_EVENTS = 4096
#: generations of tile state a reset has dropped and sweep() not yet freed;
#: beyond this a reset frees the oldest itself
_MAX_RETIRED = 8


@dataclass(frozen=True, slots=True)
class Event:
    """A program event for the trace: start, exit, exception, sync."""

    kind: str
    tile: int
    context: int
    pc: int
    detail: str


#: a decoded word (or pair): the instruction or bundle, its rule(s), and
#: which contexts may run it (bit 0 the supervisor, bit 1 workers); or why not
_Decoded = tuple[Instruction, Rule | None, int] | tuple[Bundle, Rule | None, Rule | None, int] | str
_SUPERVISOR_BIT, _WORKER_BIT = native.SUPERVISOR_BIT, native.WORKER_BIT


def _who(inst: Instruction) -> int:
    ctx = inst.row.context
    return (_SUPERVISOR_BIT if ctx & Contexts.SUPERVISOR else 0) | (_WORKER_BIT if ctx & Contexts.WORKER else 0)


class Execution:
    """Runs the tiles of ``ipu``."""

    def __init__(self, ipu: Ipu) -> None:
        self.ipu = ipu
        self.arch = Arch.named(ipu.profile.arch)
        self.decoder = Decoder.of(self.arch)
        self.memory_base = ipu.tiles.base
        self.workers = ipu.profile.workers_per_tile
        #: every tile's registers, PC, status, turns..., shared by both paths
        self.arrays = native.Arrays(ipu.profile.tiles, self.workers + 1)
        #: the native loop: on, off, or None for the process's default (native.enabled())
        self.native: bool | None = None
        self._loop: native.Loop | None = None
        self.states: dict[int, TileState] = {}
        #: tiles with an active context (a tile that stopped leaves at the next _settle)
        self.running = native.RunningTiles()
        #: tiles the host named (DBG_IOWNER = the supervisor) and has not
        #: started: members of the IPU's syncs (docs/execution.md)
        self.named: set[int] = set()
        #: tile -> (context, word): injections accepted (TDI_STS.BUSY), to
        #: retire at the start of the next run()
        self.injections: dict[int, tuple[int, int]] = {}
        self.events: deque[Event] = deque(maxlen=_MAX_EVENTS)
        #: tile -> its breakpoints, for tiles where some break is enabled
        self.breaks: dict[int, breaks.Breakpoints] = {}
        #: the DBRK watch of the instruction issuing now (Python path), else None
        self._watch: tuple[int, int, bool, bool] | None = None
        self._watcher: Context | None = None  # whose instruction that is
        self.instructions = 0  # retired since reset, every tile
        #: tiles whose TDI registers (CTXT_STS, DBG_DATA, ...) may have
        #: changed since the IPU last published them (tile_registers.py)
        self.debug_touched: set[int] = set()
        #: called when there is work (the daemon wakes its runner): an
        #: injection to retire, a sync released, state to sweep
        self.wake: Callable[[], None] | None = None
        self._retired: list[dict[int, Any]] = []  # per-tile state resets dropped, for sweep()
        self._external: int | None = None  # the zone requested of the host sync machinery
        self._cursor = 0  # the tile run() serves first next time
        self._stop: bytearray | None = None  # stop_when
        #: the latest clock at which a member tile's supervisor stopped
        #: since the last internal sync ended (it ends no earlier)
        self._left = 0
        self._cache: dict[int, _Decoded] = {}
        self._word_view = ipu.tiles.exchange.words.data  # the exchange BAR's words, read as ints
        self._window = ipu.tiles.window
        self._exchange_base = ipu.tiles.exchange_base
        self._sram = ipu.tiles.sram

    # --- state -----------------------------------------------------------------
    def state(self, tile: int) -> TileState:
        t = self.states.get(tile)
        if t is None:
            a = self.arrays
            t = self.states[tile] = TileState(tile, self.workers, a.registers[tile], a.fields[tile], a.counters[tile],
                                              a.csrs[tile])
        return t

    def reset(self) -> None:
        """Every context stops; registers, counters, names, pending
        injections and events are forgotten. The tiles' state objects are
        set aside, not freed: freeing thousands of them is what took a
        reset's time; sweep() frees them later."""
        self.set_aside(self.states)
        self.states = {}
        self.running.clear()
        self.named.clear()
        self.injections.clear()
        self.events.clear()
        self.breaks.clear()
        self._external = None
        self.instructions = 0
        self.debug_touched.clear()
        self._cursor = 0  # tiles are served from the first again, as on a new IPU
        self._left = 0

    def set_aside(self, per_tile: dict[int, Any]) -> None:
        """Keep ``per_tile`` (state a reset dropped) for sweep() to free."""
        if per_tile:
            self._retired.append(per_tile)
            if len(self._retired) > _MAX_RETIRED:
                del self._retired[0]
            self._wake()

    def sweep(self, tiles: int) -> bool:
        """Free the state of up to ``tiles`` tiles that resets dropped;
        returns whether some is left."""
        while tiles > 0 and self._retired:
            old = self._retired[0]
            for _ in range(min(tiles, len(old))):
                old.popitem()
                tiles -= 1
            if not old:
                del self._retired[0]
        return bool(self._retired)

    def _wake(self) -> None:
        if self.wake is not None:
            self.wake()

    def event(self, t: TileState, kind: str, context: int, pc: int, detail: str = "") -> None:
        """A program event: start, exit, exception (a context's state moved), sync."""
        self.events.append(Event(kind, t.tile, context, pc, detail))
        if kind != "sync":  # a context waiting for a sync stays active
            self.debug_touched.add(t.tile)

    def debug_data(self, tile: int) -> int:
        return self.ipu.tdi.setdefault(tile, TileDebug()).registers.get(TdiRegister.DBG_DATA, 0) & MASK

    def set_debug_data(self, tile: int, value: int) -> None:
        self.ipu.tdi.setdefault(tile, TileDebug()).registers[TdiRegister.DBG_DATA] = value & MASK
        self.debug_touched.add(tile)

    # --- memory ------------------------------------------------------------------
    def executable(self, address: int) -> bool:
        """Code is fetched from region 0 only (the programmer's guide)."""
        return self.ipu.tiles.locate(address).region == 0

    def require_region1(self, t: TileState, address: int) -> None:
        if self.ipu.tiles.locate(address).region != 1:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.INVALID_ADDRESS, address & MASK,
                            f"128-bit access at 0x{address & MASK:x} outside the interleaved region")

    def load(self, t: TileState, address: int, width: int) -> int:
        address &= MASK
        tiles = self.ipu.tiles
        if address % width:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.MISALIGNED, address,
                            f"{width}-byte load at 0x{address:x}")
        if self._watch is not None and breaks.hits(self._watch, address, width, False):
            raise self._data_break(address, width, "load")
        if tiles.bad_parity and tiles.bad_word(t.tile, address, width):
            raise TileFault(*_PARITY_FAULT, address, f"parity error loading 0x{address:x}")
        if width == 4:  # the common case, one word of the BAR without building bytes
            return self._word_view[(self._exchange_base + t.tile * self._window
                                    + (address & 0x1FFFFF) % self._window % self._sram) >> 2]
        return int.from_bytes(tiles.read(t.tile, address, width), "little")

    def store(self, t: TileState, address: int, width: int, value: int) -> None:
        address &= MASK
        if address % width:
            raise TileFault(Etype.INVALID_ADDR, ExceptionCause.MISALIGNED, address,
                            f"{width}-byte store at 0x{address:x}")
        if self._watch is not None and breaks.hits(self._watch, address, width, True):
            raise self._data_break(address, width, "store")
        tiles = self.ipu.tiles
        if width == 4 and not tiles.bad_parity:  # one word, recorded dirty as BarMemory.write does
            at = self._exchange_base + t.tile * self._window + (address & 0x1FFFFF) % self._window % self._sram
            tiles.exchange.store_word(at >> 2, value & MASK)
            return
        tiles.write(t.tile, address, (value & ((1 << 8 * width) - 1)).to_bytes(width, "little"))

    def _word(self, t: TileState, address: int) -> int:
        # TileMemory.locate's offset and region, inline: this runs per fetch.
        offset = (address & 0x1FFFFF) % self._window % self._sram
        if offset >= self._sram >> 1:
            raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, address,
                            f"fetch at 0x{address:x} outside region 0")
        tiles = self.ipu.tiles
        if tiles.bad_parity and tiles.bad_word(t.tile, address, 4):
            raise TileFault(*_PARITY_FAULT, address, f"parity error fetching 0x{address:x}")
        return self._word_view[(self._exchange_base + t.tile * self._window + offset) >> 2]

    # --- workers -------------------------------------------------------------------
    def launch(self, t: TileState, w: Context, entry: int, vertex_base: int) -> None:
        """Start worker ``w`` at ``entry`` (run, runall): launch state as
        A hover/$FP_CTL.md, $FP_STS.md, $PC.md say; $m13 = vertex base and
        $m12 = $WORKER_BASE (A hover/$m12.md, $m13.md)."""
        w.stop()
        w.pc = entry
        w.status = Status.ACTIVE
        w.exit_status = None
        w.csrs[0x02] = vertex_base
        w.upper[2] = t.supervisor.csrs[0x20]  # $FP_CTL := $FP_ICTL
        w.upper[0] = 0  # $FP_STS
        w.set_m(13, vertex_base)
        w.set_m(12, t.supervisor.csrs[0x20 + w.number])
        self._activate(t)
        self.event(t, "start", w.number, entry)

    def _activate(self, t: TileState) -> None:
        if t.tile not in self.running:
            self.running.add(t.tile)
            self._wake()

    # --- running -----------------------------------------------------------------------
    def run(self, budget: int, slice_turns: int = 512) -> int:
        """Take up to ``budget`` turns across the running tiles, tile by
        tile in slices; returns the turns taken. Each tile's results and
        turn count do not depend on the budget or slicing. Injections
        accepted since the last call retire first."""
        if self.injections:
            self.retire_injections()
        loop = self._native_loop()
        done = 0 if loop is None else self._run_native(loop, budget, slice_turns)
        while loop is None and done < budget and self.running:
            taken = 0
            order = sorted(self.running)
            # Fair across calls: start after the tile served last, and give
            # each tile a share of the budget.
            first = bisect_left(order, self._cursor) % len(order)
            share = max(16, min(slice_turns, (budget - done) // len(order)))
            for tile in order[first:] + order[:first]:
                taken += self._run_tile(self.states[tile], min(share, budget - done - taken))
                self._cursor = tile + 1
                if done + taken >= budget:
                    break
            done += taken
            released = self._settle()
            if not taken and not released:
                break
        if self.debug_touched:
            self.ipu.debug_changed()
        return done

    def _run_native(self, loop: native.Loop, budget: int, slice_turns: int) -> int:
        """run() in the native loop: the same passes over the running tiles
        as above, so that every turn is taken in the same order; the C loop
        makes them, calling back for the turns it does not take and for
        _settle after a pass in which Python took a turn (a pass without one
        changed nothing _settle reads)."""
        done, more = 0, True
        while more and done < budget and self.running:
            running = len(self.running)

            def settle() -> tuple[bool, bool]:
                return self._settle(), len(self.running) != running  # it only drops tiles

            taken, self._cursor, retired, more = loop.run(self.running.order(), slice_turns,
                                                          budget - done, self._cursor, self._learn,
                                                          self._python_turn, settle, self._logged)
            self.instructions += retired
            done += taken
        return done

    def _scan(self) -> tuple[list[int], list[int]]:
        """The running tiles with no active context, and native.Loop.scan's counts."""
        return self._the_loop().scan(self.running.order())

    def busy(self) -> bool:
        """Whether some context can take a turn now (or will once the
        internal sync every member has reached is released), or an
        injection waits."""
        if self.injections:
            return True
        if not self.running:
            return False
        counts = self._scan()[1]
        return counts[native.RUNNABLE] > 0 or self._internal_due(counts)

    def native_on(self) -> bool:
        """Whether turns run in the native loop (Execution.native, else
        IPUFS_NATIVE_EXECUTOR), and may now: not while a parity mark
        exists (loads and fetches check those on the Python path)."""
        return (native.enabled() if self.native is None else self.native) and not self.ipu.tiles.bad_parity

    def _native_loop(self) -> native.Loop | None:
        return self._the_loop() if self.native_on() else None

    def _the_loop(self) -> native.Loop:
        if self._loop is None:
            self._loop = native.Loop(self.arrays, self.ipu.tiles.exchange, self._exchange_base,
                                     self._window, self._sram, self.memory_base, csr.native_ops(self.arch))
            self._loop.stop_when(self._stop)
        return self._loop

    def stop_when(self, flag: bytearray | None) -> None:
        """End each run() of the native loop early, after the tile in hand,
        once ``flag[0]`` is nonzero (and offer the CPU to other threads
        now and then while it runs): the daemon's FUSE reader sets it while
        a request waits for the lock the caller holds. Tiles' results do
        not depend on where a run ends."""
        self._stop = flag
        if self._loop is not None:
            self._loop.stop_when(flag)

    def _run_tile(self, t: TileState, turns: int) -> int:
        n = 0
        while n < turns:
            c = t.next_runnable()
            if c is None:
                if not self._release_local(t):
                    break
                continue
            n += 1
            self._turn(t, c)
        return n

    def _turn(self, t: TileState, c: Context) -> None:
        t.fields[native.TURNS] += 1  # the arrays in place, here and in _issue: this runs per turn
        f = c.fields
        if f[native.DELAY]:
            f[native.DELAY] -= 1
            return
        try:
            if f[native.BREAK]:
                self._watched_issue(t, c)
            else:
                self._issue(t, c)
        except TileFault as fault:
            self.fault(t, c, fault)

    def _watched_issue(self, t: TileState, c: Context) -> None:
        """A turn of a context a breakpoint applies to (docs/execution.md,
        "Breakpoints"): RBRK pending from its last instruction, then IBRK at
        the PC, then the instruction with DBRK watching its accesses; a
        context the host just resumed ignores IBRK and DBRK for one
        instruction."""
        b = self.breaks[t.tile]
        resumed, c.resumed = c.resumed, False
        pc = c.pc
        if c.retired_break:
            c.retired_break = False
            if b.retirement(c):
                raise TileFault(Etype.RBRK, ExceptionCause.BREAKPOINT, pc, f"retirement break before 0x{pc:x}")
        if not resumed and b.instruction(c, pc):
            c.csrs[csr.DBG_BRK_ID] = breaks.IBRK_CHANNEL
            raise TileFault(Etype.IBRK, ExceptionCause.BREAKPOINT, pc, f"instruction break at 0x{pc:x}")
        self._watch, self._watcher = None if resumed else b.watch(c), c
        try:
            self._issue(t, c)
        finally:
            self._watch = None
        if c.status is Status.ACTIVE and b.retirement(c):
            c.retired_break = True

    def _data_break(self, address: int, width: int, access: str) -> TileFault:
        c = self._watcher
        assert c is not None, "a watch is set only with its context"
        c.csrs[csr.DBG_BRK_ID] = breaks.DBRK_CHANNEL
        return TileFault(Etype.DBRK, ExceptionCause.BREAKPOINT, address,
                         f"data break: {width}-byte {access} at 0x{address:x}")

    def breaks_changed(self, tile: int) -> None:
        """A breakpoint register of ``tile`` was written (a `put` to its
        supervisor's $DBG_IBRK0_*/$DBG_DBRK0_*, the TDI's DBG_RBRK or
        DBG_RBRK_VERT): what breaks is read again, and each context's
        BREAK field says whether its turns must run here."""
        t = self.state(tile)
        csrs = t.supervisor.csrs
        regs = self.ipu.tdi.setdefault(tile, TileDebug()).registers
        b = breaks.Breakpoints(csrs[breaks.IBRK_CTL], csrs[breaks.IBRK_PC],
                               csrs[breaks.IBRK_VERT], csrs[breaks.DBRK_CTL],
                               csrs[breaks.DBRK_BASE], regs.get(TdiRegister.DBG_RBRK, 0),
                               regs.get(TdiRegister.DBG_RBRK_VERT, 0))
        if b.any():
            self.breaks[tile] = b
        else:
            self.breaks.pop(tile, None)
        for c in t.contexts:
            c.fields[native.BREAK] = applies = b.applies(c.number)
            if not applies:  # the flags are read on _watched_issue's turns only
                c.resumed = c.retired_break = False

    def _logged(self, kind: int, tile: int, context: int, pc: int, value: int) -> None:
        """A program event of the native loop, for the trace, as the rules log it."""
        t = self.states[tile]
        if kind == native.EVENT_SYNC:
            system.synced(self, t, context, pc, value)
        elif kind == native.EVENT_START:
            self.event(t, "start", context, pc)
        else:
            system.exited(self, t, context, pc, value)

    def _python_turn(self, tile: int) -> None:
        """The turn the native loop hands back: a context of ``tile`` can run."""
        t = self.states[tile]
        c = t.next_runnable()
        assert c is not None, "the native loop hands back only turns a context can take"
        self._turn(t, c)

    def _learn(self, key: int) -> tuple[int, list[tuple[int, int, tuple[int, ...]]]]:
        """What the native loop does with ``key``, a word or a bundle's two:
        who may run it and each half's form, kind and operands, from the
        decoder and the rules' native column; the Python form otherwise."""
        found = self._decode_key(key)
        python: tuple[int, list[tuple[int, int, tuple[int, ...]]]] = (0, [(native.PYTHON_FORM, 0, ())])
        if isinstance(found, str):
            return python
        if len(found) == 3:
            inst, rule, who = found
            pairs = [(inst, rule)]
        else:
            bundle, main_rule, aux_rule, who = found
            pairs = [(bundle.main, main_rule), (bundle.aux, aux_rule)]
        if any(rule is None or not rule.native for _, rule in pairs):
            return python
        if len(pairs) == 2 and all(inst.row.group not in (Group.CONTROL, Group.SYSTEM) for inst, _ in pairs):
            who |= native.BODY_BIT  # may be in an rpt body
        return who, [(*native.code(rule.native), inst.operands) for inst, rule in pairs if rule is not None]

    def _decode(self, t: TileState, pc: int) -> _Decoded:
        word = self._word(t, pc)
        if not word & 0x80000000:
            key = word
        else:
            if pc % 8:
                raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, pc,
                                f"bundle at 0x{pc:x} is not 8-byte aligned")
            key = word | self._word(t, pc + 4) << 32
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._decode_key(key)
        return found

    def _decode_key(self, key: int) -> _Decoded:
        if key <= MASK:
            inst = self.decoder.decode(key)
            if inst is None:
                return f"0x{key:08x} is not an instruction"
            return inst, SEMANTICS.get(inst.row.variant), _who(inst)
        pair = self.decoder.decode_bundle(key)
        if isinstance(pair, str):
            return pair
        return (pair, SEMANTICS.get(pair.main.row.variant), SEMANTICS.get(pair.aux.row.variant),
                _who(pair.main) & _who(pair.aux))

    def _check(self, c: Context, inst: Instruction, rule: Rule | None, who: int) -> Rule:
        if rule is not None and who & (_WORKER_BIT if c.number else _SUPERVISOR_BIT):
            return rule
        if not inst.row.context & (Contexts.WORKER if c.is_worker else Contexts.SUPERVISOR):
            runner = "a worker" if c.is_worker else "the supervisor"
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, c.pc,
                            f"{inst.mnemonic} cannot run on {runner}")
        if rule is None:
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc, why_not(inst.mnemonic))
        return rule

    def _issue(self, t: TileState, c: Context) -> None:
        f = c.fields
        pc = f[native.PC]
        if pc % 4:
            raise TileFault(Etype.INVALID_PC, ExceptionCause.INVALID_PC, pc, f"PC 0x{pc:x} is not 4-byte aligned")
        decoded = self._decode(t, pc)
        if isinstance(decoded, str):
            raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, pc, decoded)
        in_body = f[native.REPEAT] and f[native.REPEAT_FIRST] <= pc < f[native.REPEAT_END]
        if len(decoded) == 3:
            inst, rule, who = decoded
            if in_body:
                raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, pc,
                                f"{inst.mnemonic}: a solo instruction in an rpt body")
            rule = self._check(c, inst, rule, who)
            c.next_pc = pc + 4
            rule.handler(self, t, c, inst.operands)
            retired = 1
        else:
            bundle, main_rule, aux_rule, who = decoded
            if in_body and any(i.row.group in (Group.CONTROL, Group.SYSTEM) for i in (bundle.main, bundle.aux)):
                raise TileFault(Etype.INVALID_INSTR, ExceptionCause.INVALID_INSTRUCTION, pc,
                                "a control or system instruction in an rpt body")
            main_rule = self._check(c, bundle.main, main_rule, who)
            aux_rule = self._check(c, bundle.aux, aux_rule, who)
            c.next_pc = pc + 8
            # Both halves read the registers as they were before the bundle
            # (ours: the public record does not say); the aux half runs on
            # a copy of $a taken before the main half wrote it.
            a = c.a
            before = a.tolist()
            main_rule.handler(self, t, c, bundle.main.operands)
            after_main = a.tolist()
            for i in range(16):
                a[i] = before[i]
            aux_rule.handler(self, t, c, bundle.aux.operands)
            for i in range(16):
                if after_main[i] != before[i]:
                    a[i] = after_main[i]
            retired = 2
        if f[native.REPEAT] and c.next_pc == f[native.REPEAT_END] and f[native.REPEAT_FIRST] <= pc:
            if f[native.REPEAT_LEFT]:  # the body again
                f[native.REPEAT_LEFT] -= 1
                c.next_pc = f[native.REPEAT_FIRST]
            else:
                c.repeat = None
        f[native.PC] = c.next_pc & MASK
        t.fields[native.INSTRUCTIONS] += retired
        self.instructions += retired

    # --- exceptions ------------------------------------------------------------------------
    def fault(self, t: TileState, c: Context, fault: TileFault) -> None:
        """Context ``c`` takes an exception: it stops (EXCEPTED), its
        $SSR/$WSR.ETYPE is set, and the IPU raises it (EXC_*, signal 44).
        A breakpoint keeps a running rpt, for the resume to go on in it."""
        repeat = c.repeat if fault.etype in _BREAKS else None
        if c.number == 0:
            self._leaves(t)
        c.stop()
        c.repeat = repeat
        c.status = Status.EXCEPTED
        c.sr = (c.sr & ~0xF0) | int(fault.etype) << 4
        self.event(t, "exception", c.number, c.pc, f"{fault.etype.name}: {fault}")
        self.ipu.raise_exception(int(fault.cause), t.tile, fault.address & MASK, c.number)

    def mark_excepted(self, tile: int, context: int) -> None:
        """An exception raised for ``context`` by another path (the TDI, the
        fault API): it stops too."""
        if context > self.workers:
            return
        t = self.state(tile)
        c = t.contexts[context]
        if c.status is not Status.EXCEPTED:
            if context == 0 and c.status is Status.ACTIVE:
                self._leaves(t)
            c.stop()
            c.status = Status.EXCEPTED
            self.debug_touched.add(tile)
            self._wake()  # what can run, or a sync's members, changed

    def _leaves(self, t: TileState) -> None:
        """``t``'s supervisor stops: a member leaves the syncs, and an
        internal sync the others wait at ends no earlier than now."""
        if t.supervisor.status is Status.ACTIVE and t.tile in self.running:
            self._left = max(self._left, t.turns)

    def clear_exception(self, tile: int, context: int) -> None:
        """DBG_ECLR: an excepted context becomes inactive."""
        t = self.states.get(tile)
        if t is not None and context <= self.workers and t.contexts[context].status is Status.EXCEPTED:
            t.contexts[context].stop()
            t.contexts[context].sr &= ~0xF0
            self.debug_touched.add(tile)

    # --- syncs ------------------------------------------------------------------------------
    def _release_local(self, t: TileState) -> bool:
        s = t.supervisor
        if s.wait is Wait.WORKERS and all(w.status is not Status.ACTIVE for w in t.contexts[1:]):
            s.wait = Wait.NONE
            return True
        return False

    def _internal_due(self, counts: list[int]) -> bool:
        """Whether every member (the running tiles' active supervisors; a
        named tile not yet started is one that has not arrived) waits at
        an internal sync, which _settle then ends (``counts``: _scan's)."""
        members = counts[native.MEMBERS]
        return members > 0 and not self.named and counts[native.INTERNAL] == members

    def _settle(self) -> bool:
        """Drop tiles that stopped; complete syncs every member has
        reached. Returns whether a context was released."""
        # One look at every running tile's contexts, in the arrays.
        if not self.running:
            return False
        stopped, counts = self._scan()
        for tile in stopped:
            self.running.discard(tile)
        members = counts[native.MEMBERS]  # the running tiles' active supervisors
        if not members or self.named:  # a named tile not yet started is a member that has not arrived
            return False
        supervisors = self.arrays.fields[:, 0]
        if self._internal_due(counts):
            # Every member goes on from the latest arrival's clock: the
            # tiles stood still meanwhile (docs/execution.md, "Timing").
            tiles = self.running.order()
            waiting = tiles[supervisors[tiles, native.WAIT] == _INTERNAL]
            clocks = self.arrays.counters[:, native.TURNS]
            clocks[waiting] = max(int(clocks[waiting].max()), self._left)
            self._left = 0
            supervisors[waiting, native.WAIT] = native.WAIT_NONE
            return True
        if self._external is None and counts[native.EXTERNAL] == members:
            tiles = self.running.order()
            waiting = tiles[supervisors[tiles, native.WAIT] == _EXTERNAL].tolist()
            zones = {self.states[tile].supervisor.wait_zone for tile in waiting}
            if len(zones) == 1:
                zone = self._external = zones.pop()
                self.ipu.request_sync(zone)
                if self.ipu.sync_status & SYNC_ERROR:
                    self._external = None
                    for tile in sorted(self.running):
                        t = self.states[tile]
                        if t.supervisor.wait is Wait.EXTERNAL:
                            self.fault(t, t.supervisor, TileFault(
                                Etype.EXERR, ExceptionCause.SYNC, t.supervisor.pc,
                                f"sync {zone}: the IPU's host sync refused it"))
                    return True
                return self._external is None
        return False

    def sync_completed(self, zone: int) -> None:
        """The IPU's host sync on ``zone`` completed: tiles waiting on it go on."""
        if self._external != zone:
            return
        self._external = None
        for tile in self.running:
            s = self.states[tile].supervisor
            if s.wait is Wait.EXTERNAL and s.wait_zone == zone:
                s.wait = Wait.NONE
        self._wake()  # a GS2 barrier may complete from another IPU's request

    # --- the host's names and injections through the TDI -----------------------------------------
    def name(self, tile: int, context: int) -> None:
        """DBG_IOWNER written: naming the supervisor of a tile whose
        supervisor is not active makes the tile a member of the IPU's
        syncs until it starts; naming a worker ends that."""
        t = self.states.get(tile)
        if context == 0 and (t is None or t.supervisor.status is not Status.ACTIVE):
            self.named.add(tile)
        else:
            self._unname(tile)

    def _unname(self, tile: int) -> None:
        if tile in self.named:
            self.named.discard(tile)
            self._wake()  # a sync the tile held back may complete

    def inject(self, tile: int, context: int, word: int) -> TdiResult:
        """DBG_IEXEC: accept ``word`` for ``context`` of ``tile``, which must
        be inactive or excepted (A114 hover/$DBG_IEXEC.md, R docs/tdi.md);
        it retires at the start of the next run() (TDI_STS.BUSY until
        then). The caller keeps one injection per tile at a time."""
        if context > self.workers:
            return TdiResult.BAD_VALUE
        if self.state(tile).contexts[context].status is Status.ACTIVE:
            return TdiResult.NOT_QUIESCENT
        if self._injectable(context, word) is None:
            return TdiResult.UNSUPPORTED
        self.injections[tile] = (context, word)
        self._wake()
        return TdiResult.OK

    def _injectable(self, context: int, word: int) -> tuple[Instruction, Rule] | None:
        inst = self.decoder.decode(word & MASK)
        if inst is None or inst.coissue or inst.mnemonic in ("sync", "rpt"):
            return None
        rule = SEMANTICS.get(inst.row.variant)
        if rule is None or not inst.row.context & (Contexts.WORKER if context else Contexts.SUPERVISOR):
            return None
        return inst, rule

    def retire_injections(self) -> None:
        """Execute the accepted injections: each tile's TDI_STS.BUSY clears,
        with CNQ if its context became active meanwhile, INV if the
        instruction faulted on an excepted context. The tiles are marked
        in debug_touched: run() publishes their registers (TDI_STS,
        DBG_DATA, CTXT_STS) when it ends."""
        pending, self.injections = self.injections, {}
        for tile, (context, word) in sorted(pending.items()):
            result = self._retire(tile, context, word)
            self.debug_touched.add(tile)
            debug = self.ipu.tdi.setdefault(tile, TileDebug())
            debug.status &= ~TdiStatus.BUSY
            if result == TdiResult.NOT_QUIESCENT:
                debug.status |= TdiStatus.CNQ
            elif result != TdiResult.OK:
                debug.status |= TdiStatus.INV

    def _retire(self, tile: int, context: int, word: int) -> TdiResult:
        """One injected instruction. A control instruction (a branch, call,
        brnzdec) leaves the context active where it leads: a branch to a
        program's entry starts it; any other ends the tile's name."""
        t = self.state(tile)
        c = t.contexts[context]
        if c.status is Status.ACTIVE:
            return TdiResult.NOT_QUIESCENT
        found = self._injectable(context, word)
        assert found is not None  # inject() checked it; the table does not change
        inst, rule = found
        was = c.status
        c.next_pc = (c.pc + 4) & MASK
        if context == 0:
            self._unname(tile)  # started (a member while active) or not starting
        try:
            rule.handler(self, t, c, inst.operands)
        except TileFault as fault:
            if was is Status.EXCEPTED:
                return TdiResult.TDI_ERROR
            self.fault(t, c, fault)
            return TdiResult.OK
        if inst.row.group is Group.CONTROL:
            c.pc = c.next_pc
            f = c.fields
            if f[native.REPEAT] and not f[native.REPEAT_FIRST] <= c.pc < f[native.REPEAT_END]:
                c.repeat = None  # the rpt a break kept (fault()) is left: resumed elsewhere
            c.status = Status.ACTIVE
            c.resumed = was is Status.EXCEPTED and bool(c.fields[native.BREAK])
            c.sr &= ~0xF0
            self.ipu.tdi.setdefault(tile, TileDebug()).excepted.pop(context, None)
            self._activate(t)
            self.event(t, "start", context, c.pc)
        return TdiResult.OK
