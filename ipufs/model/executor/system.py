# Semantics of system instructions: starting and ending workers (run,
# runall, exitz/exitnz/exitneg/exitpos), CSR access (get, put, uget, uput),
# sync and trap (delay is an exchange instruction: exchange_ops.py). Sources per rule; what the public record leaves
# open (which free worker `run` takes, what an exit status does) is
# ipufs's own choice, stated in docs/execution.md.
from __future__ import annotations

from typing import TYPE_CHECKING

from ipufs.abi.registers import ExceptionCause
from ipufs.model.executor import csr, native
from ipufs.model.executor.rule import Rule, s32
from ipufs.model.executor.state import Etype, Status, TileFault, Wait
from ipufs.model.sync import HOST_ZONES, Zone

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

A = "A hover/{}.md"


def _check_launch(ex: Machine, c: Context, entry: int, vbase: int) -> None:
    if entry % 4 or vbase % 4:
        raise TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, c.pc,
                        f"run: entry 0x{entry:x} and vertex base 0x{vbase:x} must be 4-byte aligned")
    if not ex.executable(entry):
        raise TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, c.pc,
                        f"run: entry 0x{entry:x} is not in region 0")


def _run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    entry, vbase = c.m[o[0]], (c.m[o[1]] + o[2] * 4 + ex.memory_base) & 0xFFFFFFFF
    _check_launch(ex, c, entry, vbase)
    free = [w for w in t.contexts[1:] if w.status is Status.INACTIVE]
    if not free:
        raise TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, c.pc,
                        "run: every worker context is busy (ipufs faults rather than wait)")
    ex.launch(t, free[0], entry, vbase)


def _runall(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    entry, vbase = c.m[o[0]], c.m[o[1]]
    _check_launch(ex, c, entry, vbase)
    active = [w for w in t.contexts[1:] if w.status is not Status.INACTIVE]
    if active:
        # A hover/runall.md: $SSR.RAERR, and every active worker raises an
        # exception as it retires its next instruction (its turns go to the
        # Python path, which raises it)
        c.sr |= 1 << 3
        for w in active:
            if w.status is Status.ACTIVE:
                w.doomed = True
                w.fields[native.BREAK] = 1
        raise TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, c.pc,
                        "runall while a worker is active")
    for n, w in enumerate(t.contexts[1:]):
        ex.launch(t, w, entry, (vbase + n * o[2] * 4) & 0xFFFFFFFF)


def _exit(test: str) -> Rule:
    def run(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        v = c.m[o[0]]
        status = {"z": v == 0, "nz": v != 0, "neg": s32(v) < 0, "pos": s32(v) > 0}[test]
        c.exit_status = int(status)
        t.link &= int(status)
        c.stop()
        exited(ex, t, c.number, c.pc, int(status))
    return Rule(run, A.format(f"exit{test}") + " (Boolean status to the supervisor: ANDed into $SSR.LC, ours)",
                f"exit.{test}")


def exited(ex: Machine, t: TileState, context: int, pc: int, status: int) -> None:
    """The trace's event of a worker's exit (the native loop's too)."""
    ex.event(t, "exit", context, pc, f"status {status}")


def _get(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_m(o[0], csr.read(ex, t, c, o[1]))


def _put(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    csr.write(ex, t, c, o[0], c.m[o[1]])


def _uget(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    c.set_a(o[0], csr.read_upper(ex, t, c, o[1]))


def _uput(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    csr.write_upper(ex, t, c, o[0], c.a[o[1]])


def _sync(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    zone = o[0]
    if zone == Zone.RECV:  # the tile's host packets, answered at once (host_exchange.py)
        ex.exchange.receive(t, c)
    elif zone == Zone.ANS:  # until the syncs `sans` armed have passed (none armed: at once)
        if c.csrs[csr.ANS_DCOUNT]:
            c.wait = Wait.ANS
    elif zone == Zone.LOCAL:
        c.wait = Wait.WORKERS
    elif zone == Zone.INTERNAL:
        c.wait = Wait.INTERNAL
    elif zone in HOST_ZONES:
        c.wait, c.wait_zone = Wait.EXTERNAL, zone
    else:
        raise TileFault(Etype.INVALID_OP, ExceptionCause.INVALID_OPERATION, c.pc,
                        f"sync {zone}: no such sync zone (CAUSEID_INVALID_SYNCZONE)")
    synced(ex, t, c.number, c.pc, zone)


def synced(ex: Machine, t: TileState, context: int, pc: int, zone: int) -> None:
    """The trace's event of a sync (the native loop's too)."""
    ex.event(t, "sync", context, pc, f"zone {zone}")


def _trap(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    if o[0] > 1:
        raise TileFault(Etype.INVALID_INSTR, ExceptionCause.NOT_EXECUTABLE, c.pc,
                        f"trap {o[0]}: which patched breakpoint an immediate above 1 raises is not public")
    raise TileFault(Etype.PBRK1 if o[0] else Etype.PBRK0, ExceptionCause.BREAKPOINT, c.pc, f"trap {o[0]}")


RULES: dict[str, Rule] = {
    "run_mmmn_zi": Rule(_run, A.format("run") + " (vertex base = $vbase + imm×4 + memory base; "
                        "the lowest-numbered inactive worker: ours)", "run"),
    "runall_mmmn_zi": Rule(_runall, A.format("runall") + " (worker n: $vbase + n×imm×4)", "runall"),
    "exitz_mmmn": _exit("z"),
    "exitnz_mmmn": _exit("nz"),
    "exitneg_mmmn": _exit("neg"),
    "exitpos_mmmn": _exit("pos"),
    # native: the CSRs csr.native_ops names (plain registers and reads computed from the arrays)
    "get_mmmn_zi": Rule(_get, A.format("get"), "get"),
    "put_mmmn_zi": Rule(_put, A.format("put"), "put"),
    "uget_aaan_zi": Rule(_uget, A.format("uget"), "uget"),
    "uput_aaan_zi": Rule(_uput, A.format("uput"), "uput"),
    "sync_mmmn_zi": Rule(_sync, "R docs/sync zones.md (zones); LOCAL waits for the workers: inferred from R's "
                        "boot loader (runall then sync 2); ANS waits for the armed syncs: inferred; "
                        "RECV carries out the tile's host packets (host_exchange.py: ours)",
                        "sync"),  # native: LOCAL, INTERNAL and HOST_ZONES
    "trap_mmmn_zi": Rule(_trap, A.format("trap") + " (patched breakpoint; R's PBRK0 and PBRK1: the immediate "
                         "picks one, inferred; above 1 not public)"),
}
