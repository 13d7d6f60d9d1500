# Helpers of the exchange tests: an ipu21 model, per-tile supervisor
# programs assembled and written into tile memory, tiles started as the
# autoloader starts them, and a small planner of exchange rows written
# from the public record's rules (osmarks/ipu-stack's exchange reference
# and its multicast rows, docs/execution.md "Exchange"): a sender sends
# `count` words from its event `first`; a receiver selects it on the
# events they arrive at and points its incoming pointer at the events they
# are stored at. Each tile's timed events become a row: delays between
# control writes, sends split where a control falls inside them (sendpic).
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ipufs.model.fabric import Fabric
from ipufs.model.ipu import Ipu
from ipufs.model.isa import Arch, encode_row
from ipufs.model.isa.assembler import Assembler
from ipufs.model.isa.syntax import Scope, Syntax
from ipufs.model.profile import PROFILES, Region
from tests.model.test_ipu import sparse

P = PROFILES["ipu21"]
CODE = 0x4C000
NEUTRAL = 0x640
FABRIC = Fabric.gc200()


def ipu21() -> Ipu:
    return Ipu(P, 0, {r: sparse(P.region_size(r)) for r in Region})


def physical(tile: int) -> int:
    return int(FABRIC.physical[tile])


def time(s: int, r: int) -> int:
    return int(FABRIC.time[s, r])


def direction(s: int, r: int) -> int:
    return int(FABRIC.direction[s, r])


def latency(r: int) -> int:
    return int(FABRIC.latency[r])


@functools.cache
def assemble(source: str, at: int = CODE) -> bytes:
    """The words of supervisor ``source`` placed at ``at`` (cached: tiles share rows)."""
    text = f"\t.supervisor\n\t.section .text, \"ax\", {at:#x}\n{source}"
    out = Assembler(Arch.IPU21, "exchange.s").assemble(text)
    (section,) = [s for s in out.sections if s.data]
    assert section.address == at
    return bytes(section.data)


_SYNTAX = Syntax(Arch.IPU21, True)


@functools.cache
def encode_row_text(row: str) -> bytes:
    """The words of a row (one instruction per line, no labels): rows hold
    no address of their own, so they run wherever they are put (8-byte
    aligned); quicker than assembling thousands of them."""
    out = []
    for line in row.splitlines():
        r, values = _SYNTAX.read(line.strip(), Scope())
        word = encode_row(r, values)
        out += [word & 0xFFFFFFFF, word >> 32] if r.wide else [word]
    return b"".join(w.to_bytes(4, "little") for w in out)


def load(ipu: Ipu, tile: int, address: int, data: bytes) -> None:
    ipu.tiles.write_words(tile, address, np.frombuffer(data.ljust(-(-len(data) // 4) * 4, b"\0"), np.uint32))


def words(ipu: Ipu, tile: int, address: int, count: int) -> list[int]:
    return ipu.tiles.read_words(tile, address, count).tolist()


def start(ipu: Ipu, tiles: list[int], entry: int = CODE) -> None:
    for tile in tiles:
        ipu.execution.start(tile, entry)


def run(ipu: Ipu, budget: int = 1 << 14, calls: int = 100_000) -> None:
    """Run until nothing can run."""
    for _ in range(calls):
        ipu.execution.run(budget)
        if not ipu.execution.busy():
            return
    raise AssertionError("the tiles did not finish")


@dataclass
class Schedule:
    """One tile's timed exchange events in a phase: sends (first event,
    count, byte address, sctl) and control writes (event, "pic" or "xpic",
    selector, value)."""

    sends: list[tuple[int, int, int, int]] = field(default_factory=list)
    controls: list[tuple[int, str, int, int]] = field(default_factory=list)
    horizon: int = 0

    def row(self) -> str:
        """The row: timed instructions, then `br $m10`."""
        out: list[str] = []
        c = 0  # the tile's event count so far
        controls = sorted(self.controls)
        assert len({e for e, *_ in controls}) == len(controls), "two controls at one event"
        for first, count, address, sctl in sorted(self.sends):
            while controls and controls[0][0] < first:
                c = _control(out, c, controls.pop(0))
            if first - 1 > c:
                out.append(f"delay {first - 1 - c - 1}")
                c = first - 1
            assert c == first - 1, "a send overlaps another, or a control before it"
            done = 0
            while done < count:
                at = c + 1
                inside = controls.pop(0) if controls and controls[0][0] == at else None
                end = min(count, done + 64)
                if controls and at < controls[0][0] <= first + count - 1:
                    end = min(end, done + controls[0][0] - at)
                n = end - done
                if inside is not None:
                    _, kind, select, value = inside
                    assert done, "a control at a send's first event"
                    out.append(f"sendpic {n - 1}, {select + (2 if kind == 'pic' else 0)}, {value}")
                elif not done:
                    out.append(f"send {n - 1}, {(address >> 2) & 0x3FFFF}, {sctl}")
                else:
                    out.append(f"sendoff {n - 1}, 0, {sctl}")
                done, c = end, c + n
        while controls:
            c = _control(out, c, controls.pop(0))
        if self.horizon > c:
            out.append(f"delay {self.horizon - c - 1}")
        return "".join(f"\t{line}\n" for line in out) + "\tbr $m10\n"


def _control(out: list[str], c: int, control: tuple[int, str, int, int]) -> int:
    event, kind, select, value = control
    assert event > c, "a control at an event already past"
    if event - c > 1:
        out.append(f"delay {event - c - 2}")
    out.append(f"delay{'x' if kind == 'xpic' else ''}pic 0, {select}, {value}")
    return event


def transfer(rows: dict[int, Schedule], sender: int, receivers: list[int], count: int, source: int,
             destination: int, first: int) -> None:
    """``sender`` sends ``count`` words from ``source``, its first at its
    event ``first``, to ``destination`` on each receiver: the receiver's
    multiplexer names the sender from the event the first word arrives
    until after the last, and its pointer is set at the event the first is
    stored (absolute addresses: $INCOMING_BASE 0)."""
    sctl = direction(sender, receivers[0]) if len(receivers) == 1 else 3
    rows.setdefault(sender, Schedule()).sends.append((first, count, source, sctl))
    for r in receivers:
        arrive = first + time(sender, r)
        assert arrive >= 1, "the sender starts too early for this receiver"
        row = rows.setdefault(r, Schedule())
        stored = arrive + latency(r)
        neutral = arrive + count + (arrive + count == stored)  # one event later than the pointer's, if they meet
        row.controls += [(arrive, "xpic", 0, physical(sender)), (neutral, "xpic", 0, NEUTRAL),
                         (stored, "pic", 0, destination >> 2)]
        row.horizon = max(row.horizon, arrive + latency(r) + count + 5)
    sender_row = rows[sender]
    sender_row.horizon = max(sender_row.horizon, first + count + 5)


def earliest(sender: int, receivers: list[int]) -> int:
    """The first event a sender may send at for every receiver's
    multiplexer write to come after the phase's start."""
    return max(1, 1 - min(time(sender, r) for r in receivers))


PHASE = """\
\tsetzi $m8, 0
\tput $INCOMING_BASE, $m8
\tput $OUTGOING_BASE, $m15
\tsync 3
\tcall $m10, {row}
"""


def phase_program(rows: list[str], after: str = "", idle: list[bool] | None = None) -> bytes:
    """A supervisor program of one or more phases: each tile syncs (sync
    3), calls its row, and at the end branches to 0 (it halts); a phase
    the tile sits out (``idle``) is `sans 0; sync 1`."""
    body = []
    for k, row in enumerate(rows):
        if idle and idle[k]:
            body.append("\tsans 0\n\tsync 1\n")
        else:
            body.append(PHASE.format(row=f"row{k}"))
    text = "".join(body) + after + "\tbr $m15\n"
    for k, row in enumerate(rows):
        text += f"\t.align 8\nrow{k}:\n{row}"
    return assemble(text)
