# The fault kinds, as one table: each kind's name, its typed fields (ranges,
# defaults, help), what a client sees and the model action. Validation
# (faults.py), the injector, fault plans (plan.py), the `ipufs inject`
# subcommands (ipufs/cli_faults.py) and the table of docs/faults.md all come
# from it. Adding a kind is one entry here plus its test (docs/architecture.md
# shows one). Ranges follow the registers a value lands in (every register
# is a u32) and the profile (tiles, contexts). No numpy: the CLI imports it.
from __future__ import annotations

from operator import attrgetter

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import ExceptionCause
from ipufs.daemon.fields import U32_MAX, Choice, Field, Flag, Integer, Limits, Seconds, Words
from ipufs.model.sync import Zone, interrupt_for

if TYPE_CHECKING:
    from ipufs.model.ipu import Ipu

#: Runs ``action`` in the daemon's loop after ``seconds``.
Later = Callable[[float, Callable[[], None]], None]
#: A kind's effect: the IPU's model, the checked field values, Later.
Action = Callable[["Ipu", dict[str, Any], Later], None]


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault: ``help`` says what it does (the `ipufs inject`
    help), ``sees`` what a client sees (docs/faults.md). With
    ``one_or_more``, every field is optional but one must be given."""

    name: str
    help: str
    sees: str
    fields: tuple[Field, ...]
    action: Action
    one_or_more: bool = False


#: A tile address is an unsigned 21-bit number (shared facts; the model's
#: tiles.ADDRESS_BITS, which imports numpy: a test keeps the two equal).
ADDRESS_BITS = 21
CAUSES = {c.name.lower(): int(c) for c in ExceptionCause}
ZONES = {"gs1": Zone.GS1, "gs1h": Zone.GS1H, "gs2": Zone.GS2, "gs2h": Zone.GS2H,
         "gs1-master": Zone.GS1_MSR, "gs1h-master": Zone.GS1H_MSR,
         "gs2-master": Zone.GS2_MSR, "gs2h-master": Zone.GS2H_MSR}
SOURCES = {s.name.lower(): int(s) for s in Interrupt}


def _tiles(limits: Limits) -> int:
    return limits.tiles - 1


def _contexts(limits: Limits) -> int:
    return limits.contexts - 1


TILE = Integer("tile", "the tile", default=0, option="--tile", hi=_tiles, hi_text="TILES-1")
CONTEXT = Integer("context", "0 supervisor, 1.. workers", default=0, option="--context", hi=_contexts,
                  hi_text="CONTEXTS-1")


def _exception(ipu: Ipu, p: dict[str, Any], later: Later) -> None:
    ipu.raise_exception(ExceptionCause[p["cause"].upper()], p["tile"], p["address"], p["context"])


def _sync(ipu: Ipu, p: dict[str, Any], later: Later) -> None:
    zone = ZONES[p["zone"]]
    if p["arrive"]:
        ipu.command_sync(zone)
    else:
        ipu.raise_interrupt(interrupt_for(zone))


def _icu_timeout(ipu: Ipu, p: dict[str, Any], later: Later) -> None:
    ipu.set_icu_responsive(False)
    if p["for"]:
        later(p["for"], lambda: ipu.set_icu_responsive(True))


def _interrupt(ipu: Ipu, p: dict[str, Any], later: Later) -> None:
    source = Interrupt[p["source"].upper()]  # before the stamp: not part of what it times
    if p["stamp"]:
        # For latency measurements: the moment of the event, read here
        # because the model reads no clocks.
        ipu.stamp_scratch(time.monotonic_ns())
    ipu.raise_interrupt(source)


KINDS: dict[str, FaultKind] = {k.name: k for k in (
    FaultKind(
        "exception", "raise an exception (signal 44)",
        "signal 44; the exception in `EXC_*` (held until cleared)",
        (Choice("cause", "why", default="injected", option="--cause", names=CAUSES),
         TILE,
         Integer("address", "the tile address (EXC_ADDRESS)", default=0, option="--addr", hi=U32_MAX),
         CONTEXT),
        _exception),
    FaultKind(
        "parity", "mark a word of tile memory with bad parity",
        "the 64-bit word reads with a parity error through the TDI: exception PARITY, signal 44; "
        "cleared by a store to the word or a reset",
        (Integer("tile", "the tile", option="--tile", hi=_tiles, hi_text="TILES-1"),
         Integer("address", "a tile address (21 bits) of tile memory", option="--addr",
                 lo=attrgetter("first_address"), hi=attrgetter("last_address"), hi_text="the end of tile memory")),
        lambda ipu, p, later: ipu.tiles.mark_bad_parity(p["tile"], p["address"])),
    FaultKind(
        "sync", "complete a sync (signal 46..49), or arrive at one with --arrive",
        "the sync completes: signal 46/47/48/49 by zone. With `--arrive` the IPU arrives at the "
        "barrier as if its host asked, so a GS2 waits for the rest of the group",
        (Choice("zone", "the sync zone", default="gs1", metavar="ZONE", names=ZONES),
         Flag("arrive", "arrive as if the host asked (a GS2 waits for the group)", default=False,
              option="--arrive")),
        _sync),
    FaultKind(
        "icu-timeout", "the ICU stops answering",
        "for `--for` seconds (0: until `icu-recover`), the ICU takes requests and answers none: "
        "MAILBOX_WRITE_READ fails with ETIMEDOUT, the rings get no answers, `STATUS` bit 3 is set",
        (Seconds("for", "how long: 2s, 500ms, 1.5 (0: until icu-recover)", default=0.0, option="--for"),),
        _icu_timeout),
    FaultKind(
        "icu-recover", "the ICU answers again", "the ICU answers again", (),
        lambda ipu, p, later: ipu.set_icu_responsive(True)),
    FaultKind(
        "link-down", "the link goes down", "exception LINK and signal 44; `STATUS` bit 2 while down", (),
        lambda ipu, p, later: ipu.set_link(False)),
    FaultKind(
        "link-up", "the link comes back", "`STATUS` bit 2 clears", (),
        lambda ipu, p, later: ipu.set_link(True)),
    FaultKind(
        "link-errors", "the link corrects some errors (replayed transfers)",
        "`link correctable error count` and its session figure grow by `--count`; the link stays up",
        (Integer("count", "how many errors", default=1, option="--count", lo=1, hi=U32_MAX),),
        lambda ipu, p, later: ipu.link_errors.add(p["count"], time.monotonic())),
    FaultKind(
        "telemetry", "change telemetry",
        "the TEMPERATURE, POWER, CLOCK registers and the ICU's telemetry answers",
        (Integer("temperature_mc", "temperature", optional=True, option="--temperature", scale=1000,
                 unit="°C", metavar="CELSIUS"),
         Integer("power_mw", "power", optional=True, option="--power", scale=1000, unit="W", metavar="WATTS"),
         Integer("clock_mhz", "clock", optional=True, option="--clock", unit="MHz", metavar="MHZ")),
        lambda ipu, p, later: ipu.set_telemetry(**p),
        one_or_more=True),
    FaultKind(
        "icu-message", "the ICU posts a message to the host (signal 45)",
        "the message queued in the response ring: signal 45, the mailbox readable",
        (Words("words", "the message: five u32", metavar="W"),),
        lambda ipu, p, later: ipu.post_icu_message(tuple(p["words"]))),
    FaultKind(
        "reset", "reset the device from the device side", "a device reset from the device side", (),
        lambda ipu, p, later: ipu.reset()),
    FaultKind(
        "interrupt", "raise an interrupt source directly",
        "that source raised (signal 44 + its bit); with `stamp`, the daemon first writes the low 32 bits "
        "of its CLOCK_MONOTONIC (ns) into SCRATCH, so a client can time event → signal",
        (Choice("source", "the interrupt source", metavar="SOURCE", names=SOURCES),
         Flag("stamp", "store the time of the event (CLOCK_MONOTONIC ns, low 32 bits) in SCRATCH first",
              default=False, option="--stamp")),
        _interrupt),
)}


def _field_doc(f: Field) -> str:
    """One field in the docs table: how `ipufs inject` and the socket name it."""
    if isinstance(f, Words):
        name = f"`{f.metavar or 'W'}0` … `{f.metavar or 'W'}{f.count - 1}` (`{f.name}`)"
    else:
        name = f"`{f.option}`" if f.option else f"`{f.metavar or f.name.upper()}`"
        if not f.option or f.option.lstrip("-") != f.name:
            name += f" (`{f.name}`)"
    if isinstance(f, Flag):
        return f"{name}: {f.help}"
    default = ""
    if not (f.required or f.optional):
        default = f", default {f.default:g}" if isinstance(f.default, float) else f", default {f.default}"
    if isinstance(f, Integer) and f.scale != 1:
        return f"{name}: {f.unit} on the command line; {f.takes()} thousandths through the socket{default}"
    unit = f" in {f.unit}" if isinstance(f, Integer) and f.unit else ""
    return f"{name}{unit}: {f.takes()}{default}"


def render_table() -> str:
    """The table of docs/faults.md."""
    rows = ["| fault | parameters (socket name where it differs) | what a client sees |", "|---|---|---|"]
    for kind in KINDS.values():
        params = "; ".join(_field_doc(f) for f in kind.fields) or "—"
        if kind.one_or_more:
            params += " (one or more)"
        rows.append(f"| `{kind.name}` | {params} | {kind.sees} |")
    return "\n".join(rows) + "\n"
