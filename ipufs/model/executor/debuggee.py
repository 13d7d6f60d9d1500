# The executor as the tile debug unit sees it (ipufs/model/debug/): what a
# context's status is, which words may be injected, and the few things
# the unit does to contexts: execute an injected instruction, hold a
# context (it stops and reads excepted), release it (excepted becomes
# inactive), and watch breakpoints. Rules: A114 hover/$DBG_IEXEC.md and
# R docs/tdi.md, as docs/execution.md states them.
from __future__ import annotations

from ipufs.abi.registers import TdiResult
from ipufs.model.executor import native
from ipufs.model.executor.ports import TileBreaks
from ipufs.model.executor.scheduler import Execution
from ipufs.model.executor.state import MASK, Status, TileFault
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
        """CTXT_STS of ``tile``, or None if it never ran."""
        t = self.execution.states.get(tile)
        return None if t is None else t.ctxt_sts()

    def wake(self) -> None:
        """There is work for the executor (an injection to retire, a sync
        that may complete)."""
        if self.execution.wake is not None:
            self.execution.wake()

    def supervisor_csrs(self, tile: int) -> memoryview:
        return self.execution.state(tile).supervisor.csrs

    def accepts(self, context: int, word: int) -> bool:
        """Whether ``word`` may be injected into ``context``."""
        return context <= self.workers and self.execution.interpreter.injectable(context, word) is not None

    def hold(self, tile: int, context: int) -> None:
        """``context`` stops where it is and reads excepted (an exception
        raised for it from outside its program: the TDI, the fault API)."""
        if context > self.workers:
            return
        ex = self.execution
        t = ex.state(tile)
        c = t.contexts[context]
        if c.status is not Status.EXCEPTED:
            if context == 0 and c.status is Status.ACTIVE:
                ex.syncs.leaves(t)
            c.stop()
            c.status = Status.EXCEPTED
            ex.debugger.changed.add(tile)
            self.wake()  # what can run, or a sync's members, changed

    def release(self, tile: int, context: int) -> None:
        """An excepted ``context`` becomes inactive (DBG_ECLR)."""
        t = self.execution.states.get(tile)
        if t is not None and context <= self.workers and t.contexts[context].status is Status.EXCEPTED:
            t.contexts[context].stop()
            t.contexts[context].sr &= ~0xF0
            self.execution.debugger.changed.add(tile)

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
            c.fields[native.BREAK] = applies = breaks is not None and breaks.applies(c.number)
            if not applies:  # the flags are read on breaking turns only
                c.resumed = c.retired_break = False

    def execute(self, tile: int, context: int, word: int) -> TdiResult:
        """Retire one injected instruction. A control instruction (a branch,
        call, brnzdec) leaves the context active where it leads: a branch
        to a program's entry starts it. NOT_QUIESCENT if the context became
        active meanwhile; TDI_ERROR if it faulted on an excepted context."""
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
            if was is Status.EXCEPTED:
                return TdiResult.TDI_ERROR
            ex.fault(t, c, fault)
            return TdiResult.OK
        if inst.row.group is Group.CONTROL:
            c.pc = c.next_pc
            f = c.fields
            if f[native.REPEAT] and not f[native.REPEAT_FIRST] <= c.pc < f[native.REPEAT_END]:
                c.repeat = None  # the rpt a break kept (fault()) is left: resumed elsewhere
            c.status = Status.ACTIVE
            c.resumed = was is Status.EXCEPTED and bool(c.fields[native.BREAK])
            c.sr &= ~0xF0
            ex.activate(t)
            ex.event(t, "start", context, c.pc)
        return TdiResult.OK
