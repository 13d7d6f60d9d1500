# Execution state of one tile: its contexts (the supervisor, context 0, and
# the profile's workers, 1..N), each with its registers, PC and status as
# CTXT_STS encodes it, and the tile's CSRs. Facts: the IPU programmer's
# guide and Graphcore's assembly docs (one supervisor and six workers per
# tile, $m on every context, $a on workers), the IPU1 constants of
# Saghetti0/graphcore-ipu-research (CTXT_STS fields, TileException ETYPEs,
# SSR/WSR fields). docs/execution.md says which parts are ours.
from __future__ import annotations

import enum
from dataclasses import dataclass, field

MASK = 0xFFFFFFFF
SUPERVISOR = 0


class Status(enum.IntEnum):
    """A context's 2-bit CTXT_STS field (TileCtxtStatus)."""

    INACTIVE = 0
    ACTIVE = 1
    EXCEPTED = 2  # EXCEPTED_DBG; ipufs never reports EXCEPTED_NDBG (3)


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


_ACTIVE = Status.ACTIVE


class Wait(enum.Enum):
    """Why an active context does not take turns."""

    NONE = "none"
    WORKERS = "workers"  # sync 2 (LOCAL): until every worker is inactive
    INTERNAL = "internal"  # sync 3: until every running tile of the IPU arrives
    EXTERNAL = "external"  # sync 4..7, 12..15: until the IPU's host sync completes


_NO_WAIT = Wait.NONE


class TileFault(Exception):
    """An instruction faulted: the context takes an exception of ``etype``;
    ``cause`` is the ipufs EXC_CAUSE, ``address`` the faulting data
    address (memory faults) or the instruction's address."""

    def __init__(self, etype: Etype, cause: int, address: int, message: str) -> None:
        super().__init__(message)
        self.etype = etype
        self.cause = cause
        self.address = address


@dataclass
class Repeat:
    """A running `rpt` loop: the body's first bundle, the address after
    it, and the iterations still to start after the current one."""

    first: int
    end: int
    remaining: int


@dataclass(eq=False)
class Context:
    """One hardware context: registers, PC and what it is doing."""

    number: int  # 0 supervisor, 1..N workers (as DBG_IOWNER numbers them)
    m: list[int] = field(default_factory=lambda: [0] * 16)
    a: list[int] = field(default_factory=lambda: [0] * 16)
    pc: int = 0
    next_pc: int = 0
    status: Status = Status.INACTIVE
    wait: Wait = Wait.NONE
    wait_zone: int = 0
    delay: int = 0  # turns still to stall (delay)
    repeat: Repeat | None = None
    #: status register ($SSR on the supervisor, $WSR on a worker)
    sr: int = 0
    csrs: dict[int, int] = field(default_factory=dict)  # other lower-space CSRs held as written
    upper: dict[int, int] = field(default_factory=dict)  # upper space (workers)
    exit_status: int | None = None  # the Boolean a worker's exit handed over

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

    def runnable(self) -> bool:
        return self.status is Status.ACTIVE and self.wait is Wait.NONE

    def stop(self) -> None:
        """Back to inactive, waiting for nothing."""
        self.status = Status.INACTIVE
        self.wait = Wait.NONE
        self.delay = 0
        self.repeat = None


class TileState:
    """The contexts of one tile and the turn they are at. Contexts take
    turns round-robin, supervisor first (docs/execution.md, timing)."""

    def __init__(self, tile: int, workers: int) -> None:
        self.tile = tile
        self.contexts = [Context(n) for n in range(workers + 1)]
        self.turn = 0  # the context whose turn comes next
        self.turns = 0  # turns taken since reset (the tile's clock: $SCOUNT, $COUNT)
        self.instructions = 0  # instructions retired (a bundle counts two)
        self.count_offset = 0  # what puts to $SCOUNT_L/U moved the clock by
        self.link = 1  # $SSR.LC: the Boolean the workers' exits hand over (docs/execution.md)

    @property
    def supervisor(self) -> Context:
        return self.contexts[SUPERVISOR]

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
        """The context whose turn it is, skipping those that cannot run."""
        contexts = self.contexts
        n = len(contexts)
        turn = self.turn
        for i in range(turn, turn + n):
            c = contexts[i if i < n else i - n]
            if c.status is _ACTIVE and c.wait is _NO_WAIT:
                self.turn = c.number + 1 if c.number + 1 < n else 0
                return c
        return None
