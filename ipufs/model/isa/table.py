# The shape of the instruction table (rows.py holds the rows): what one
# row says about an encoding, and the enumerations it uses: lanes (LLVM's
# TSFlags lane bit: main pipeline with the $m file, aux with the $a file),
# contexts (which of LLVM's Common/Worker/Supervisor tables holds it),
# groups and architectures (LLVM's ipu2+/ipu21 predicates). Facts:
# docs/isa.md, section "The table".
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ipufs.model.isa.operands import Operand, parse_spec

COISSUE_BIT = 1 << 31


class Lane(enum.Enum):
    """The pipeline an instruction issues to; a bundle is main then aux."""

    MAIN = "main"
    AUX = "aux"


class Context(enum.Flag):
    """Which contexts may run an instruction."""

    SUPERVISOR = enum.auto()
    WORKER = enum.auto()
    BOTH = SUPERVISOR | WORKER


class Group(enum.Enum):
    """What kind of work an instruction does (from LLVM's flags)."""

    CONTROL = "control"  # branches, calls, rpt
    SYSTEM = "system"  # CSR access, threads, sync and exchange, trap
    LOAD = "load"
    STORE = "store"
    LOAD_STORE = "load-store"  # the *pace forms that do both
    MAIN_ALU = "main-alu"  # other main-lane work: $m arithmetic, logic, moves
    AUX_ALU = "aux-alu"  # other aux-lane work: $a logic, floating point, AMP


class Arch(enum.IntEnum):
    """Tile architectures, in order: a row runs on its own and later ones."""

    IPU1 = 1
    IPU2 = 2
    IPU21 = 3

    @classmethod
    def named(cls, name: str) -> Arch:
        """``ipu1``/``ipu2``/``ipu21`` → Arch; ValueError otherwise."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown architecture {name!r} (ipu1, ipu2 or ipu21)") from None


MAIN, AUX = Lane.MAIN, Lane.AUX
SUPERVISOR, WORKER, BOTH = Context.SUPERVISOR, Context.WORKER, Context.BOTH
CONTROL, SYSTEM, LOAD, STORE, LOAD_STORE = Group.CONTROL, Group.SYSTEM, Group.LOAD, Group.STORE, Group.LOAD_STORE
MAIN_ALU, AUX_ALU = Group.MAIN_ALU, Group.AUX_ALU
IPU1, IPU2, IPU21 = Arch.IPU1, Arch.IPU2, Arch.IPU21


@dataclass(frozen=True, slots=True)
class Row:
    """One encoding of the instruction set.

    ``word & mask == value`` for every word of this encoding; ``mask`` has
    bit 31 set only where the co-issue flag is fixed: to 0 for instructions
    that never pair, to 1 for the two-word ones (``wide``). ``operands`` are in assembly order, each with its bit
    ranges (operands.py). ``variant`` is LLVM's name of the encoding."""

    mnemonic: str
    variant: str
    mask: int
    value: int
    spec: str
    lane: Lane
    context: Context
    group: Group
    since: Arch
    operands: tuple[Operand, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        ops = tuple(parse_spec(s) for s in self.spec.split()) if self.spec else ()
        object.__setattr__(self, "operands", ops)

    @property
    def co_issuable(self) -> bool:
        """May this instruction be one half of a co-issued pair?"""
        return not self.mask & COISSUE_BIT

    @property
    def wide(self) -> bool:
        """A two-word instruction (sendpicp): bit 31 of its first word is
        fixed to 1, and its second word holds operands, never code."""
        return bool(self.mask & self.value & COISSUE_BIT)

    @property
    def size(self) -> int:
        """Its bytes in memory: 8 for a two-word instruction, else 4."""
        return 8 if self.wide else 4

    @property
    def opcode(self) -> int:
        """The primary opcode, bits 30..24 (fixed in every row but the
        exchange ones, whose operand fields reach bit 25 or 26)."""
        return (self.value >> 24) & 0x7F

    def runs_on(self, arch: Arch) -> bool:
        return arch >= self.since

    def __str__(self) -> str:
        return f"{self.mnemonic} ({self.variant})"
