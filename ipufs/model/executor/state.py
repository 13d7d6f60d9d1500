# Execution state of one tile: its contexts (the supervisor, context 0, and
# the profile's workers, 1..N), each with its registers, PC and status as
# CTXT_STS encodes it, and the tile's CSRs. Facts: the IPU programmer's
# guide and Graphcore's assembly docs (one supervisor and six workers per
# tile, $m on every context, $a on workers), the IPU1 constants of
# Saghetti0/graphcore-ipu-research (CTXT_STS fields, TileException ETYPEs,
# SSR/WSR fields). docs/execution.md says which parts are ours.
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ipufs.model.executor.native import (
    CONTEXT_FIELDS, COUNT_OFFSET, CSRS, DELAY, EVENTS, EXIT, INSTRUCTIONS, LINK, PC, REGISTERS, REPEAT, REPEAT_END,
    REPEAT_FIRST, REPEAT_LEFT, STATUS, TILE_FIELDS, TURN, TURNS, UPPER, WAIT, WAIT_ANS, WAIT_EXCHANGE, WAIT_INTERNAL,
    WAIT_NONE, WAIT_WORKERS, WAIT_ZONE,
)

MASK = 0xFFFFFFFF
SUPERVISOR = 0


class Status(enum.IntEnum):
    """A context's 2-bit CTXT_STS field (TileCtxtStatus): a debug
    exception (a break, `trap`, break on sync) leaves it EXCEPTED (2,
    EXCEPTED_DBG), any other EXCEPTED_NDBG (3), as a real C600 shows them
    (osmarks/ipu-stack docs/PATCHED_BREAKPOINT_RE_FINDINGS.md)."""

    INACTIVE = 0
    ACTIVE = 1
    EXCEPTED = 2
    EXCEPTED_NDBG = 3

    @property
    def excepted(self) -> bool:
        return self >= Status.EXCEPTED


class Etype(enum.IntEnum):
    """The 4-bit ETYPE of $SSR/$WSR (TileException)."""

    NONE = 0
    RBRK = 1
    PBRK0 = 2
    PBRK1 = 3
    BOS = 4
    FP = 5
    CONFLICT = 6
    EXCONF = 7
    INVALID_ADDR = 8
    INVALID_OP = 9
    INVALID_PC = 10
    DBRK = 11
    INVALID_INSTR = 12
    EXERR = 13
    MEMERR = 14
    IBRK = 15


_ACTIVE = int(Status.ACTIVE)
#: the ETYPEs of debug exceptions (a context they stop reads EXCEPTED, 2)
DEBUG_ETYPES = frozenset({Etype.RBRK, Etype.PBRK0, Etype.PBRK1, Etype.BOS, Etype.DBRK, Etype.IBRK})
#: $WSR.ERPT: an exception inside an rpt body, which makes it malign (A hover/rpt.md; R CSR_W_WSR__ERPT)
ERPT = 1 << 9
#: $SSR/$WSR.ETYPE
ETYPE_SHIFT, ETYPE_MASK = 4, 0xF0


def excepted_status(etype: Etype) -> Status:
    """The status an exception of ``etype`` leaves its context in."""
    return Status.EXCEPTED if etype in DEBUG_ETYPES else Status.EXCEPTED_NDBG


class Wait(enum.Enum):
    """Why an active context does not take turns."""

    NONE = "none"
    WORKERS = "workers"  # sync 2 (LOCAL): until every worker is inactive
    INTERNAL = "internal"  # sync 3: until every running tile of the IPU arrives
    EXTERNAL = "external"  # sync 4..7, 12..15: until the IPU's host sync completes
    EXCHANGE = "exchange"  # for a word another tile has yet to send (exchange.py; the tile stands still)
    ANS = "ans"  # sync 1: until the syncs `sans` armed have passed (the tile stands still)


#: the codes the arrays hold (native.py: the C loop knows NONE and WORKERS)
_WAITS = (Wait.NONE, Wait.WORKERS, Wait.INTERNAL, Wait.EXTERNAL, Wait.EXCHANGE, Wait.ANS)
WAIT_CODES = {w: i for i, w in enumerate(_WAITS)}
assert WAIT_CODES[Wait.NONE] == WAIT_NONE and WAIT_CODES[Wait.WORKERS] == WAIT_WORKERS
assert WAIT_CODES[Wait.EXCHANGE] == WAIT_EXCHANGE and WAIT_CODES[Wait.ANS] == WAIT_ANS
#: waits during which the whole tile stands still (no context takes turns)
_STILL = frozenset({WAIT_INTERNAL, WAIT_EXCHANGE, WAIT_ANS})
_STATUSES = tuple(Status)


class TileFault(Exception):
    """An instruction faulted: the context takes an exception of ``etype``;
    ``cause`` is the ipufs EXC_CAUSE, ``address`` the faulting data
    address (memory faults) or the instruction's address."""

    def __init__(self, etype: Etype, cause: int, address: int, message: str) -> None:
        super().__init__(message)
        self.etype = etype
        self.cause = cause
        self.address = address


@dataclass(frozen=True)
class Repeat:
    """A running `rpt` loop: the body's first bundle, the address after
    it, and the iterations still to start after the current one (held in
    the context's fields: Context.repeat)."""

    first: int
    end: int
    remaining: int


class _Field:
    """An int64 of an object's ``fields`` (its row of the arrays), read and
    written in place as an int attribute."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, obj: Any, owner: Any = None) -> int:
        return obj.fields[self.index]  # type: ignore[no-any-return]

    def __set__(self, obj: Any, value: int) -> None:
        obj.fields[self.index] = value


class Context:
    """One hardware context: registers, CSRs, PC and what it is doing. Its
    registers, CSRs and the fields the native loop also uses (PC, status,
    wait, delay, a running rpt, the exit status) live in its tile's arrays
    (native.Arrays) and are read and written there in place."""

    __slots__ = ("number", "m", "a", "fields", "csr_row", "csrs", "upper", "next_pc", "resumed",
                 "retired_break", "held_idle", "redirected", "doomed")

    def __init__(self, number: int, registers: memoryview | None = None, fields: memoryview | None = None,
                 csrs: memoryview | None = None) -> None:
        self.number = number  # 0 supervisor, 1..N workers (as DBG_IOWNER numbers them)
        if registers is None:
            registers = np.zeros(REGISTERS, np.uint32).data
        self.m: memoryview = registers[:16]  # $m0..$m15: ints, read and written in place
        self.a: memoryview = registers[16:]  # $a0..$a15
        #: PC, status, wait, delay, rpt, exit status, sync zone (native.py's layout)
        self.fields = fields if fields is not None else np.zeros(CONTEXT_FIELDS, np.int64).data
        self.csr_row = csrs if csrs is not None else np.zeros(CSRS, np.uint32).data
        self.csrs: memoryview = self.csr_row[:UPPER]  # lower space, by index: held as written
        self.upper: memoryview = self.csr_row[UPPER:]  # upper space (workers), by index
        self.next_pc = 0
        self.exit_status = None
        #: resumed from a stop by the host: its next instruction ignores IBRK and DBRK (breaks.py)
        self.resumed = False
        #: an instruction retired with RBRK enabled: the context breaks before its next one
        self.retired_break = False
        #: stopped by the host while inactive, with nowhere to go: DBG_ECLR leaves it inactive
        self.held_idle = False
        #: given a PC by an injected branch since it stopped: DBG_ECLR starts it there, breaks applying
        self.redirected = False
        #: active when runall was refused: it faults when it retires its next instruction (A hover/runall.md)
        self.doomed = False

    pc = _Field(PC)
    delay = _Field(DELAY)  # turns still to stall (delay)
    wait_zone = _Field(WAIT_ZONE)  # the zone of the external sync it waits at

    @property
    def sr(self) -> int:
        """The status register's held bits ($SSR on the supervisor, $WSR on a worker)."""
        return self.csrs[1]

    @sr.setter
    def sr(self, value: int) -> None:
        self.csrs[1] = value & 0xFFFFFFFF

    @property
    def exit_status(self) -> int | None:
        """The Boolean a worker's exit handed over."""
        value = self.fields[EXIT]
        return None if value < 0 else value

    @exit_status.setter
    def exit_status(self, value: int | None) -> None:
        self.fields[EXIT] = -1 if value is None else value

    @property
    def status(self) -> Status:
        return _STATUSES[self.fields[STATUS]]  # type: ignore[no-any-return]

    @status.setter
    def status(self, value: Status) -> None:
        self.fields[STATUS] = int(value)

    @property
    def wait(self) -> Wait:
        return _WAITS[self.fields[WAIT]]

    @wait.setter
    def wait(self, value: Wait) -> None:
        self.fields[WAIT] = WAIT_CODES[value]

    @property
    def repeat(self) -> Repeat | None:
        f = self.fields
        return Repeat(f[REPEAT_FIRST], f[REPEAT_END], f[REPEAT_LEFT]) if f[REPEAT] else None

    @repeat.setter
    def repeat(self, value: Repeat | None) -> None:
        f = self.fields
        if value is None:
            f[REPEAT] = f[REPEAT_FIRST] = f[REPEAT_END] = f[REPEAT_LEFT] = 0
        else:
            f[REPEAT], f[REPEAT_FIRST], f[REPEAT_END], f[REPEAT_LEFT] = 1, value.first, value.end, value.remaining

    @property
    def is_worker(self) -> bool:
        return self.number != SUPERVISOR

    def set_m(self, reg: int, value: int) -> None:
        """Write $m``reg`` ($m15 reads 0 whatever is written)."""
        if reg != 15:
            self.m[reg] = value & MASK

    def set_a(self, reg: int, value: int) -> None:
        """Write $a``reg`` ($a15 reads 0 whatever is written)."""
        if reg != 15:
            self.a[reg] = value & MASK

    def stop(self) -> None:
        """Back to inactive, waiting for nothing."""
        self.status = Status.INACTIVE
        self.wait = Wait.NONE
        self.delay = 0
        self.repeat = None
        self.resumed = self.retired_break = self.held_idle = self.redirected = self.doomed = False

    def launch(self, entry: int, vertex_base: int, fp_ictl: int, worker_base: int) -> None:
        """A worker's launch state (run, runall), as A hover/$FP_CTL.md,
        $FP_STS.md, $PC.md say: $FP_CTL := $FP_ICTL, $FP_STS := 0,
        $m13 = vertex base, $m12 = $WORKER_BASE (A hover/$m12.md, $m13.md)."""
        self.stop()
        self.pc = entry
        self.status = Status.ACTIVE
        self.exit_status = None
        self.csrs[0x02] = vertex_base
        self.upper[2] = fp_ictl
        self.upper[0] = 0
        self.set_m(13, vertex_base)
        self.set_m(12, worker_base)


class TileState:
    """The contexts of one tile and the turn they are at. Contexts take
    turns round-robin, supervisor first (docs/execution.md, timing).
    ``registers`` [context, 32], ``csrs`` [context, CSRS], ``fields``
    [context, CONTEXT_FIELDS] and ``counters`` [TILE_FIELDS] are the
    tile's rows of its IPU's arrays (native.Arrays), zeroed here; without
    them the tile has arrays of its own."""

    def __init__(self, tile: int, workers: int, registers: NDArray[np.uint32] | None = None,
                 fields: NDArray[np.int64] | None = None, counters: NDArray[np.int64] | None = None,
                 csrs: NDArray[np.uint32] | None = None) -> None:
        n = workers + 1
        registers = np.zeros((n, REGISTERS), np.uint32) if registers is None else registers
        csrs = np.zeros((n, CSRS), np.uint32) if csrs is None else csrs
        fields = np.zeros((n, CONTEXT_FIELDS), np.int64) if fields is None else fields
        counters = np.zeros(TILE_FIELDS, np.int64) if counters is None else counters
        registers[...] = 0
        csrs[...] = 0
        fields[...] = 0
        counters[...] = 0
        self.tile = tile
        self.contexts = [Context(i, registers[i].data, fields[i].data, csrs[i].data) for i in range(n)]
        self.fields = counters.data  # turn, turns, instructions, link, count offset (native.py's layout)
        self.link = 1
        #: the exchange receive error the tile's TDI shows in CTXT_STS bits 27..29 (TEXCH_RERR_*; 0 none)
        self.receive_error = 0

    turn = _Field(TURN)  # the context whose turn comes next
    turns = _Field(TURNS)  # turns taken since reset (the tile's clock: $SCOUNT, $COUNT)
    instructions = _Field(INSTRUCTIONS)  # instructions retired (a bundle counts two)
    link = _Field(LINK)  # $SSR.LC: the Boolean the workers' exits hand over (docs/execution.md)
    count_offset = _Field(COUNT_OFFSET)  # what puts to $SCOUNT_L/U moved the clock by
    events = _Field(EVENTS)  # the supervisor's exchange events since the tile's last sync (exchange.py)

    @property
    def supervisor(self) -> Context:
        return self.contexts[SUPERVISOR]

    def boot(self, entry: int) -> None:
        """Every context stops, its ETYPE cleared; the supervisor starts at ``entry``."""
        for c in self.contexts:
            c.stop()
            c.sr &= ~ETYPE_MASK
        s = self.supervisor
        s.pc = entry
        s.status = Status.ACTIVE

    def active(self) -> bool:
        """Whether any context is active (running or waiting)."""
        return any(c.status is Status.ACTIVE for c in self.contexts)

    def ctxt_sts(self) -> int:
        """CTXT_STS: SU[1:0], W0[3:2] .. W5[13:12]."""
        word = 0
        for c in self.contexts:
            word |= int(c.status) << (2 * c.number)
        return word

    def next_runnable(self) -> Context | None:
        """The context whose turn it is, skipping those that cannot run;
        none while the supervisor waits at an internal sync (the tile
        stands still until every member has arrived: docs/execution.md,
        "Timing"), for its armed syncs (`sync 1`) or for an exchange word."""
        contexts = self.contexts
        if contexts[0].fields[WAIT] in _STILL and contexts[0].fields[STATUS] == _ACTIVE:
            return None
        n = len(contexts)
        counters = self.fields
        turn = counters[TURN]
        for i in range(turn, turn + n):
            c = contexts[i if i < n else i - n]
            f = c.fields
            if f[STATUS] == _ACTIVE and f[WAIT] == WAIT_NONE:
                counters[TURN] = c.number + 1 if c.number + 1 < n else 0
                return c
        return None
