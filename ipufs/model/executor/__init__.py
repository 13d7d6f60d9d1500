# The executor: tiles run code. state.py (contexts, registers, status),
# the semantic tables (alu.py, memory_ops.py, control.py, system.py,
# csr.py, fp.py, joined in semantics.py) typed against what they use
# (ports.py), the scheduler (scheduler.py: turns, the native loop, syncs in
# syncs.py), the Python path (interpreter.py, access.py) and the debug
# unit's handle on it (debuggee.py). docs/execution.md.
from __future__ import annotations

from ipufs.model.executor.scheduler import Event, Execution
from ipufs.model.executor.semantics import NOT_PUBLIC, SEMANTICS
from ipufs.model.executor.state import Context, Etype, Status, TileFault, TileState

__all__ = ["NOT_PUBLIC", "SEMANTICS", "Context", "Etype", "Event", "Execution", "Status", "TileFault", "TileState"]
