# What the executor's parts see of each other and of the IPU around them,
# as small protocols (the way a Spike instruction knows processor_t, not
# the simulator): Machine is what a semantic rule may use; Device is what
# the scheduler asks of its IPU; Debugger what it asks of the IPU's debug
# unit (ipufs/model/debug/); TileBreaks what one tile's breakpoints answer
# on the Python path. No module of the executor imports the scheduler.
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ipufs.model.executor.exchange import Exchange
    from ipufs.model.executor.state import Context, TileState
    from ipufs.model.isa import Arch

#: a data break's watch: the watched bytes [first, end), and whether loads and stores match
Watch = tuple[int, int, bool, bool]


class Machine(Protocol):
    """What a semantic rule uses: tile memory, launching workers, events,
    $DBG_DATA, the breakpoint CSRs' effect, the exchange and the syncs
    `sans` arms."""

    arch: Arch
    #: where tile memory starts (a `run` vertex base is relative to it)
    memory_base: int
    #: the exchange between the IPU's tiles (exchange.py)
    exchange: Exchange

    def load(self, t: TileState, address: int, width: int) -> int:
        """``width`` bytes at tile address ``address``, little-endian
        (faults: misaligned, a data break, a parity mark)."""

    def store(self, t: TileState, address: int, width: int, value: int) -> None:
        """The low ``width`` bytes of ``value`` at ``address``."""

    def executable(self, address: int) -> bool:
        """Whether code may be fetched from ``address``."""

    def require_region1(self, t: TileState, address: int) -> None:
        """Fault unless ``address`` lies in the interleaved region."""

    def launch(self, t: TileState, w: Context, entry: int, vertex_base: int) -> None:
        """Start worker ``w`` at ``entry`` (run, runall)."""

    def event(self, t: TileState, kind: str, context: int, pc: int, detail: str = "") -> None:
        """A program event for the trace: start, exit, exception, sync."""

    def debug_data(self, tile: int) -> int:
        """$DBG_DATA of ``tile``."""

    def set_debug_data(self, tile: int, value: int) -> None: ...

    def breaks_changed(self, tile: int) -> None:
        """A breakpoint CSR of ``tile``'s supervisor was written."""

    def arm(self, t: TileState, syncs: int) -> None:
        """`sans`: ``t`` takes part in the IPU's next ``syncs`` syncs without waiting at them."""


class Device(Protocol):
    """What the scheduler asks of the IPU it runs in."""

    def raise_exception(self, cause: int, tile: int = 0, address: int = 0, context: int = 0) -> None:
        """A tile exception reaches the host (EXC_* registers, signal 44)."""

    def request_sync(self, zone: int) -> bool:
        """The tiles' sync on host zone ``zone``; False if refused."""


class Debugger(Protocol):
    """What the scheduler asks of the IPU's debug unit."""

    #: tiles whose debug registers may show something new (CTXT_STS, TDI_STS, DBG_DATA)
    changed: set[int]
    #: tiles the host named and has not started: members of the IPU's syncs that have not arrived
    named: set[int]

    def pending(self) -> bool:
        """Whether an injected instruction waits to retire."""

    def retire(self) -> None:
        """Retire the injected instructions accepted since the last run."""

    def publish(self) -> None:
        """Show the changed tiles' registers where hosts read them."""

    def data(self, tile: int) -> int:
        """DBG_DATA of ``tile``."""

    def set_data(self, tile: int, value: int) -> None: ...

    def breaks_changed(self, tile: int) -> None:
        """A breakpoint CSR of ``tile``'s supervisor was written."""


class TileBreaks(Protocol):
    """One tile's breakpoints, as the Python path asks them."""

    def applies(self, context: int) -> bool:
        """Whether any break may stop ``context``."""

    def instruction(self, c: Context, pc: int) -> bool:
        """IBRK: whether ``c`` breaks before issuing at ``pc``."""

    def watch(self, c: Context) -> Watch | None:
        """DBRK: what ``c``'s next instruction's accesses are watched for."""

    def on_sync(self, c: Context) -> bool:
        """BOS: whether ``c`` breaks before a `sync`."""

    def retirement(self, c: Context) -> bool:
        """RBRK: whether ``c`` breaks after the instruction it retired."""
