# The executor: tiles run code. state.py (contexts, registers, status),
# the semantic tables (alu.py, memory_ops.py, control.py, system.py, csr.py,
# joined in semantics.py), engine.py (turns, syncs, faults, injection) and
# debug.py (the tile debug interface's view of it). docs/execution.md.
from __future__ import annotations

from ipufs.model.executor.engine import Event, Execution
from ipufs.model.executor.semantics import NOT_PUBLIC, SEMANTICS
from ipufs.model.executor.state import Context, Etype, Status, TileFault, TileState

__all__ = ["NOT_PUBLIC", "SEMANTICS", "Context", "Etype", "Event", "Execution", "Status", "TileFault", "TileState"]
