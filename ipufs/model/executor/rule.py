# What one semantic rule is: the handler that executes an encoding (by its
# variant name in the instruction table), the public source it follows and
# the native loop's form that does the same (native.py; none: Python's).
# The semantic tables (alu.py, memory_ops.py, control.py, system.py) hold
# one Rule per encoding; semantics.py joins them.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ipufs.model.executor.state import MASK

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

#: handler(execution, tile, context, operands in assembly order)
Handler = Callable[["Machine", "TileState", "Context", tuple[int, ...]], None]


@dataclass(frozen=True, slots=True)
class Rule:
    """How an encoding executes, and the source of that semantics.
    ``native``: the form (``FORM`` or ``FORM.KIND``, native/src/executor.c)
    that executes it in the native loop; empty: only the handler does."""

    handler: Handler
    source: str
    native: str = ""


def s32(value: int) -> int:
    """A 32-bit register value read as two's complement."""
    return value - (1 << 32) if value & 0x80000000 else value


def u32(value: int) -> int:
    return value & MASK
