# The executor as the tile debug unit sees it (ipufs/model/debug/): what a
# context's status is, which words may be injected, and the few things
# the unit does to contexts: execute an injected instruction, hold a
# context (it stops where it is and reads excepted), release it (it goes
# on where it stopped, or back to inactive), and watch breakpoints.
# Rules: A114 hover/$DBG_IEXEC.md, R docs/tdi.md, and what a runtime that
# drives a real C600 shows (osmarks/ipu-stack crates/ipu-driver/src/lib.rs:
# RUN_BREAK stops a context, EXCEPTION_CLEAR resumes it at its PC), as
# docs/debugging.md states them.
from __future__ import annotations

from collections.abc import Callable

from ipufs.abi.registers import TdiResult
from ipufs.model.executor import native
from ipufs.model.executor.ports import TileBreaks
from ipufs.model.executor.scheduler import Execution
from ipufs.model.executor.state import (
    ERPT, ETYPE_MASK, ETYPE_SHIFT, MASK, Context, Etype, Status, TileFault, excepted_status,
)
from ipufs.model.isa import Group


class Debuggee:
    """The debug unit's handle on ``execution``."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.workers = execution.workers

    def status(self, tile: int, context: int) -> Status:
        t = self.execution.states.get(tile)
        return Status.INACTIVE if t is None else t.contexts[context].status

    def ctxt_sts(self, tile: int) -> int | None:
        """CTXT_STS of ``tile`` (two bits per context, the exchange receive
        error in bits 27..29), or None if it never ran."""
        t = self.execution.states.get(tile)
        return None if t is None else t.ctxt_sts() | (t.receive_error & 7) << 27

    def supervisor_csrs(self, tile: int) -> memoryview:
        return self.execution.state(tile).supervisor.csrs

    def supervisor_csr(self, tile: int, index: int) -> int:
        """The supervisor's lower CSR ``index`` (0 for a tile that never ran)."""
        t = self.execution.states.get(tile)
        return 0 if t is None else int(t.supervisor.csrs[index])

    def wake(self) -> None:
        """There is work for the executor (an injection to retire, a sync
        that may complete)."""
        if self.execution.wake is not None:
            self.execution.wake()

    def accepts(self, context: int, word: int) -> bool:
        """Whether ``word`` may be injected into ``context``."""
        return context <= self.workers and self.execution.interpreter.injectable(context, word) is not None

    def hold(self, tile: int, context: int, etype: Etype, when: Callable[[Context], bool] | None = None) -> None:
        """``context`` stops where it is and reads excepted, with ``etype``:
        the host's RUN_BREAK (RBRK), or an exception raised for it from
        outside its program (the fault API, the TDI's memory commands);
        ``when``: only if it holds of the context. A context stopped while
        inactive has nothing to resume; one stopped while running keeps
        what it waited for (a sync, a delay, an rpt)."""
        if context > self.workers:
            return
        ex = self.execution
        t = ex.state(tile)
        c = t.contexts[context]
        if c.status.excepted or when is not None and not when(c):
            return
        if c.status is Status.ACTIVE:
            if context == 0:
                ex.syncs.leaves(t)
        else:
            c.held_idle = True
        c.status = excepted_status(etype)
        c.sr = (c.sr & ~ETYPE_MASK) | int(etype) << ETYPE_SHIFT
        ex.debugger.changed.add(tile)
        self.wake()  # what can run, or a sync's members, changed

    def release(self, tile: int, context: int) -> bool:
        """EXCEPTION_CLEAR: an excepted ``context`` goes on at its PC, as
        it was when it stopped, ignoring IBRK, DBRK and BOS for its first
        instruction unless an injected branch gave it a new PC; one that
        stopped while inactive and was given no PC,
        or whose exception is not a debug one (EXCEPTED_NDBG: a fault,
        malign), becomes inactive. Returns whether it is active now."""
        ex = self.execution
        t = ex.states.get(tile)
        if t is None or context > self.workers or not t.contexts[context].status.excepted:
            return False
        c = t.contexts[context]
        ex.debugger.changed.add(tile)
        c.sr &= ~(ETYPE_MASK | ERPT)
        if c.status is Status.EXCEPTED_NDBG or c.held_idle:
            c.stop()
            return False
        c.status = Status.ACTIVE
        c.resumed = not c.redirected and bool(c.fields[native.BREAK])  # read on breaking turns only
        c.redirected = False
        ex.activate(t)
        ex.event(t, "start", context, c.pc)
        return True

    def watch(self, tile: int, breaks: TileBreaks | None) -> None:
        """What breaks on ``tile`` from now (None: nothing); each context's
        BREAK field says whether its turns must run on the Python path."""
        t = self.execution.state(tile)
        table = self.execution.interpreter.breaks
        if breaks is None:
            table.pop(tile, None)
        else:
            table[tile] = breaks
        for c in t.contexts:
            applies = breaks is not None and breaks.applies(c.number)
            c.fields[native.BREAK] = applies or c.doomed
            if not applies:  # the flags are read on breaking turns only
                c.resumed = c.retired_break = False

    def execute(self, tile: int, context: int, word: int, *, rbrk: bool = False) -> TdiResult:
        """Retire one injected instruction. A control instruction (a branch,
        call, brnzdec) gives the context the PC where it leads, for
        EXCEPTION_CLEAR to start it there (breaks applying to its first
        instruction, as they do to a program's); the context does not start (an
        inactive one with RBRK enabled, ``rbrk``, stops there: ours).
        NOT_QUIESCENT if the context became active meanwhile; TDI_ERROR if
        it faulted on an excepted context."""
        ex = self.execution
        t = ex.state(tile)
        c = t.contexts[context]
        if c.status is Status.ACTIVE:
            return TdiResult.NOT_QUIESCENT
        found = ex.interpreter.injectable(context, word)
        assert found is not None  # the debug unit asked accepts(); the table does not change
        inst, rule = found
        was = c.status
        c.next_pc = (c.pc + 4) & MASK
        try:
            rule.handler(ex, t, c, inst.operands)
        except TileFault as fault:
            if was.excepted:
                return TdiResult.TDI_ERROR
            ex.fault(t, c, fault)
            return TdiResult.OK
        if inst.row.group is Group.CONTROL:
            c.pc = c.next_pc
            f = c.fields
            if f[native.REPEAT] and not f[native.REPEAT_FIRST] <= c.pc < f[native.REPEAT_END]:
                c.repeat = None  # the rpt a break kept (fault()) is left: resumed elsewhere
            if c.status is Status.INACTIVE and rbrk:
                self.hold(tile, context, Etype.RBRK)
            c.held_idle, c.redirected = False, True  # it has somewhere to go
        ex.debugger.changed.add(tile)
        return TdiResult.OK
