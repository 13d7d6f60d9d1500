# The exchange between tiles on an ipu21 (docs/execution.md, "Exchange"):
# rows of the public record (the reference's worked example, a Poplar
# receiver row of four copies) and programs planned by the test kit from
# the same rules: point to point between a near and a far pair, one sender
# to three receivers, a ring of 16 tiles each sending and receiving at
# once, two senders into one receiver, a relay within one phase; the
# receive errors and the sender's conflict; and the same memory and turns
# however the scheduler slices the tiles.
from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import ExceptionCause
from ipufs.model.debug import TdiRegister
from ipufs.model.executor.native import THREADS
from ipufs.model.executor.state import ETYPE_MASK, ETYPE_SHIFT, Etype, Status
from ipufs.model.ipu import Ipu
from tests.model.executor.exchange_kit import (
    CODE, NEUTRAL, P, Schedule, assemble, direction, earliest, encode_row_text, ipu21, latency, load, phase_program,
    physical, run, start, time, transfer, words,
)
from tests.model.executor.kit import tdi_read
from tests.model.test_ipu import reg

SOURCE, DESTINATION = 0x60000, 0x70000


def _pattern(tile: int, count: int) -> list[int]:
    return [(tile * 0x10001 + k * 0x9E3779B1) & 0xFFFFFFFF for k in range(count)]


def _payload(ipu: Ipu, tile: int, count: int, address: int = SOURCE) -> list[int]:
    data = _pattern(tile, count)
    load(ipu, tile, address, b"".join(w.to_bytes(4, "little") for w in data))
    return data


def _run_rows(rows: dict[int, Schedule], count: int, budget: int = 1 << 14, native: bool | None = None,
              spread: bool = False, prepare: Callable[[Ipu], None] | None = None) -> tuple[Ipu, dict[int, list[int]]]:
    """Every tile of ``rows`` runs one phase; each sender's payload is its
    pattern. ``spread``: every pass that may runs on four threads."""
    ipu = ipu21()
    ipu.execution.native = native
    if spread:
        os.environ[THREADS] = "4"
        try:
            ipu.execution._the_loop().parallel_turns = 1
        finally:
            del os.environ[THREADS]
    sent = {}
    for tile, schedule in rows.items():
        load(ipu, tile, CODE, phase_program([schedule.row()]))
        if schedule.sends:
            sent[tile] = _payload(ipu, tile, count)
    if prepare is not None:
        prepare(ipu)
    start(ipu, sorted(rows))
    run(ipu, budget)
    return ipu, sent


def _halted(ipu: Ipu, tiles: list[int]) -> None:
    for tile in tiles:
        assert ipu.execution.state(tile).supervisor.status is Status.INACTIVE
        assert tdi_read(ipu, tile, TdiRegister.CTXT_STS) == 0  # as the C600's runtime sees a finished tile


# --- the reference's worked example (§ "tile A sends 4 words to tile B") ---------
SENDER = "\tdelay 22\n\tsend 3, 0x18000, 1\n\tbr $m10\n"
RECEIVER = "\tdelayxpic {mux}, 0, 0\n\tdelayxpic 3, 0, 0x640\n\tdelaypic 47, 0, 0x1c000\n\tdelay 8\n\tbr $m10\n"


def _worked(mux: int) -> tuple[Ipu, list[int]]:
    ipu = ipu21()
    a, b = 0, 1286  # physical 0 and 53: T = -23
    assert (physical(a), physical(b), time(a, b), direction(a, b)) == (0, 53, -23, 1)
    load(ipu, a, CODE, phase_program([SENDER]))
    load(ipu, b, CODE, phase_program([RECEIVER.format(mux=mux)]))
    data = _payload(ipu, a, 4)
    start(ipu, [a, b])
    run(ipu)
    _halted(ipu, [a, b])
    return ipu, data


def test_the_worked_example_of_the_reference_delivers_four_words() -> None:
    ipu, data = _worked(0)
    assert words(ipu, 1286, DESTINATION, 5) == data + [0]


def test_a_receiver_one_event_late_misses_the_first_word() -> None:
    # Its multiplexer names the sender from event 2: the word that arrived
    # at event 1 was nobody's, and the rest land from the pointer on.
    ipu, data = _worked(1)
    assert words(ipu, 1286, DESTINATION, 4) == data[1:] + [0]


# --- a Poplar-generated receiver row: four copies of 52 words into tile 0 -----------
POPLAR_ROW = [0x64000082, 0x40A00032, 0xF6600000, 0x03014048, 0xF6600000, 0x03095000, 0xF6600000, 0x04016000,
              0xF7200000, 0x19017000, 0x43A00000]


def test_a_poplar_receiver_row_takes_four_copies_at_its_pointers() -> None:
    ipu = ipu21()
    senders = [5, 6, 7, 8]  # logical; physical 130, 192, 194, 256: the row's multiplexer values
    assert [physical(s) for s in senders] == [130, 192, 194, 256]
    row = b"".join(w.to_bytes(4, "little") for w in POPLAR_ROW)
    program = assemble("\tsetzi $m8, 0\n\tput $INCOMING_BASE, $m8\n\tsync 3\n\tcall $m10, 0x4c100 >> 2\n\tbr $m15\n")
    load(ipu, 0, CODE, program)
    load(ipu, 0, 0x4C100, row)
    sent = {}
    for k, s in enumerate(senders):
        first = 1 + 52 * k - time(s, 0)  # its first word reaches tile 0's multiplexer at event 1 + 52k
        load(ipu, s, CODE, phase_program([Schedule([(first, 52, SOURCE, direction(s, 0))]).row()]))
        sent[s] = _payload(ipu, s, 52)
    start(ipu, [0, *senders])
    run(ipu)
    for s, address in zip(senders, (0x50120, 0x54000, 0x58000, 0x5C000)):
        assert words(ipu, 0, address, 52) == sent[s]
    assert ipu.execution.state(0).supervisor.csrs[0xA0] == NEUTRAL  # the row's last write
    _halted(ipu, [0, *senders])


# --- point to point, the reference's fixed-time form -----------------------------------
def _point_to_point(sender: int, receiver: int, count: int) -> dict[int, str]:
    """The point-to-point rows (mux at event 113, pointer 0 with
    $INCOMING_BASE the destination)."""
    t, ph = time(sender, receiver), latency(receiver) - 52
    send = "" if t == 112 else f"\tdelay {111 - t}\n"  # its first word reaches the multiplexer at 113
    parts = [f"\tsend {min(count, 64) - 1}, {SOURCE >> 2}, {direction(sender, receiver)}\n"]
    if count > 64:
        parts.append(f"\tsendoff {count - 65}, 0, {direction(sender, receiver)}\n")
    if count <= 51:
        tail = f"\tdelayxpic {count - 1}, 0, 0x640\n\tdelaypic {51 - count + ph}, 0, 0\n\tdelay {count + 4}\n"
    elif count == 52:
        tail = f"\tdelaypic {50 + ph}, 0, 0\n\tdelayxpic 0, 0, 0x640\n\tdelay 56\n"
    else:
        tail = f"\tdelaypic {51 + ph}, 0, 0\n\tdelayxpic {count - 53}, 0, 0x640\n\tdelay 56\n"
    return {sender: send + "".join(parts) + "\tbr $m10\n",
            receiver: f"\tdelayxpic 112, 0, {physical(sender)}\n" + tail + "\tbr $m10\n"}


@pytest.mark.parametrize("sender, receiver", [(0, 1), (0, 1427), (1427, 0), (735, 736)],
                         ids=["near pair", "corner to corner", "corner back", "across the halves"])
@pytest.mark.parametrize("count", [1, 52, 64, 200])
def test_point_to_point_between_near_and_far_tiles(sender: int, receiver: int, count: int) -> None:
    ipu = ipu21()
    rows = _point_to_point(sender, receiver, count)
    base = "\tsetzi $m8, {base}\n\tput $INCOMING_BASE, $m8\n\tput $OUTGOING_BASE, $m15\n\tsync 3\n" \
           "\tcall $m10, row\n\tbr $m15\n\t.align 8\nrow:\n{row}"
    load(ipu, sender, CODE, assemble(base.format(base=0, row=rows[sender])))
    load(ipu, receiver, CODE, assemble(base.format(base=DESTINATION, row=rows[receiver])))
    data = _payload(ipu, sender, count)
    start(ipu, [sender, receiver])
    run(ipu)
    assert words(ipu, receiver, DESTINATION, count + 1) == data + [0]
    _halted(ipu, [sender, receiver])


# --- planned rows: multicast, a ring, two senders, a relay ---------------------------
def test_one_sender_reaches_three_receivers() -> None:
    rows: dict[int, Schedule] = {}
    receivers = [1, 700, 1471]
    transfer(rows, 300, receivers, 100, SOURCE, DESTINATION, earliest(300, receivers))
    ipu, sent = _run_rows(rows, 100)
    for r in receivers:
        assert words(ipu, r, DESTINATION, 101) == sent[300] + [0]


RING = [k * 92 for k in range(16)]  # 16 tiles spread over the die


def _ring() -> dict[int, Schedule]:
    rows: dict[int, Schedule] = {}
    first = max(earliest(s, [r]) for s, r in zip(RING, RING[1:] + RING[:1]))
    for s, r in zip(RING, RING[1:] + RING[:1]):
        transfer(rows, s, [r], 24, SOURCE, DESTINATION, first)
    return rows


def test_a_ring_of_sixteen_tiles_sends_and_receives_in_one_phase() -> None:
    rows = _ring()
    assert any("sendpic" in rows[t].row() for t in RING)  # a multiplexer write inside a send
    ipu, sent = _run_rows(rows, 24)
    for s, r in zip(RING, RING[1:] + RING[:1]):
        assert words(ipu, r, DESTINATION, 24) == sent[s]


def test_the_same_phase_gives_the_same_memory_and_turns_however_it_is_sliced() -> None:
    results = []
    for budget, native, spread in ((1 << 14, None, False), (7, None, False), (1, False, False), (300, False, False),
                                   (1 << 14, True, True), (1 << 9, True, True)):
        ipu, _ = _run_rows(_ring(), 24, budget, native, spread)
        assert not spread or ipu.execution._the_loop().spread  # passes ran on the threads
        results.append(([words(ipu, r, DESTINATION, 25) for r in RING],
                        [ipu.execution.state(t).turns for t in RING]))
    assert all(r == results[0] for r in results[1:])


def test_the_native_loop_runs_the_exchange_instructions() -> None:
    ipu, sent = _run_rows(_ring(), 24, native=True)
    assert ipu.execution.interpreter.retired == 0  # no turn of a sender or a receiver went to Python
    for s, r in zip(RING, RING[1:] + RING[:1]):
        assert words(ipu, r, DESTINATION, 24) == sent[s]


def test_incoming_words_are_recorded_for_the_page_cache_and_clear_parity_marks() -> None:
    s, r = RING[0], RING[1]
    rows: dict[int, Schedule] = {}
    transfer(rows, s, [r], 8, SOURCE, DESTINATION, earliest(s, [r]))

    def prepare(ipu: Ipu) -> None:
        ipu.tiles.exchange.track_dirty = True
        ipu.tiles.exchange.take_dirty()
        ipu.tiles.mark_bad_parity(r, DESTINATION + 8)
    for native in (True, False):
        ipu, sent = _run_rows(rows, 8, native=native, prepare=prepare)
        assert words(ipu, r, DESTINATION, 8) == sent[s]
        assert not ipu.tiles.bad_parity  # the incoming word wrote over the mark
        start = ipu.tiles.window_start(r) + DESTINATION - ipu.tiles.base
        dirty = ipu.tiles.exchange.take_dirty()
        assert all(any(offset <= start + 4 * k < offset + length for offset, length in dirty) for k in range(8))


def test_two_senders_reach_one_receiver_at_different_addresses() -> None:
    rows: dict[int, Schedule] = {}
    first = earliest(40, [1000])
    transfer(rows, 40, [1000], 30, SOURCE, DESTINATION, first)
    second = first + 30 + time(40, 1000) - time(1200, 1000) + 3  # arrives after the first message
    transfer(rows, 1200, [1000], 30, SOURCE, DESTINATION + 0x1000, second)
    ipu, sent = _run_rows(rows, 30)
    assert words(ipu, 1000, DESTINATION, 31) == sent[40] + [0]
    assert words(ipu, 1000, DESTINATION + 0x1000, 31) == sent[1200] + [0]


def test_a_tile_relays_what_it_receives_in_the_same_phase() -> None:
    # Tile 0 sends 64 words to 736 and 274; 736 forwards its copy to 1286
    # as soon as it is stored (the runtime's acceptance graph, run within
    # one phase): 736 must wait for tile 0's words before it reads them.
    rows: dict[int, Schedule] = {}
    first = earliest(0, [736, 274])
    transfer(rows, 0, [736, 274], 64, SOURCE, DESTINATION, first)
    stored = first + time(0, 736) + latency(736) + 64  # 736's event after its last store
    relay = max(stored + 1, earliest(736, [1286]))
    transfer(rows, 736, [1286], 64, DESTINATION, 0x78000, relay)
    ipu = ipu21()
    for tile, schedule in rows.items():
        load(ipu, tile, CODE, phase_program([schedule.row()]))
    data = _payload(ipu, 0, 64)
    start(ipu, sorted(rows))
    run(ipu, budget=5)
    assert words(ipu, 274, DESTINATION, 64) == data
    assert words(ipu, 736, DESTINATION, 64) == data
    assert words(ipu, 1286, 0x78000, 64) == data


def test_words_nobody_selects_are_dropped() -> None:
    rows: dict[int, Schedule] = {}
    transfer(rows, 5, [9], 8, SOURCE, DESTINATION, earliest(5, [9]))
    rows[9].controls[0] = (rows[9].controls[0][0], "xpic", 0, physical(6))  # listens to another tile
    ipu, _ = _run_rows(rows, 8)
    assert words(ipu, 9, DESTINATION, 8) == [0] * 8


def test_a_send_on_the_wrong_direction_does_not_arrive() -> None:
    rows: dict[int, Schedule] = {}
    transfer(rows, 0, [1286], 4, SOURCE, DESTINATION, earliest(0, [1286]))
    first, count, address, sctl = rows[0].sends[0]
    rows[0].sends[0] = (first, count, address, 3 - sctl)
    ipu, _ = _run_rows(rows, 4)
    assert words(ipu, 1286, DESTINATION, 4) == [0] * 4


# --- errors -----------------------------------------------------------------------------
def _error(ipu: Ipu, tile: int, etype: Etype, code: int) -> None:
    t = ipu.execution.state(tile)
    s = t.supervisor
    assert s.status is Status.EXCEPTED_NDBG
    assert (s.sr & ETYPE_MASK) >> ETYPE_SHIFT == etype
    assert (tdi_read(ipu, tile, TdiRegister.CTXT_STS) >> 27) & 7 == code  # ERERR
    assert reg(ipu, "EXC_CAUSE") == ExceptionCause.EXCHANGE and reg(ipu, "EXC_TILE") == tile
    assert ipu.interrupts.raised[Interrupt.EXCEPTION] >= 1


def test_a_store_into_the_receivers_own_code_is_a_fetch_clash() -> None:
    rows: dict[int, Schedule] = {}
    transfer(rows, 3, [4], 8, SOURCE, CODE + 0x1000, earliest(3, [4]))
    ipu, _ = _run_rows(rows, 8)
    _error(ipu, 4, Etype.EXERR, 2)  # TEXCH_RERR_CLASH_IFETCH


def test_a_store_outside_tile_memory_is_an_address_error() -> None:
    rows: dict[int, Schedule] = {}
    transfer(rows, 3, [4], 8, SOURCE, 0x30000, earliest(3, [4]))
    ipu, _ = _run_rows(rows, 8)
    _error(ipu, 4, Etype.EXERR, 3)  # TEXCH_RERR_ADDR


def test_a_store_where_the_tiles_own_send_reads_is_an_instruction_clash() -> None:
    # Tile 4 receives into the element its own send is reading, at the
    # same events.
    rows: dict[int, Schedule] = {}
    first = earliest(3, [4])
    transfer(rows, 3, [4], 60, SOURCE, DESTINATION, first)
    stores = first + time(3, 4) + latency(4)
    rows.setdefault(4, Schedule()).sends.append((stores - 10, 30, DESTINATION + 0x100, 1))
    ipu, _ = _run_rows(rows, 60)
    _error(ipu, 4, Etype.EXERR, 1)  # TEXCH_RERR_CLASH_INSTR


def test_a_multiplexer_value_naming_nothing_is_a_configuration_error() -> None:
    ipu = ipu21()
    load(ipu, 2, CODE, assemble("\tsetzi $m1, 0x700\n\tput $INCOMING_MUX, $m1\n\tbr $m15\n"))
    start(ipu, [2])
    run(ipu)
    _error(ipu, 2, Etype.EXCONF, 6)  # TEXCH_RERR_CONF


def test_a_send_from_its_own_code_element_is_a_conflict() -> None:
    ipu = ipu21()
    load(ipu, 2, CODE, assemble(f"\tsend 3, {(CODE + 0x800) >> 2}, 1\n\tbr $m15\n"))
    start(ipu, [2])
    run(ipu)
    s = ipu.execution.state(2).supervisor
    assert (s.sr & ETYPE_MASK) >> ETYPE_SHIFT == Etype.CONFLICT
    assert reg(ipu, "EXC_CAUSE") == ExceptionCause.EXCHANGE


def test_what_is_not_modelled_says_so() -> None:
    for source in ("\tsend 3, 0x18000, 5\n", "\tdelayxpic 0, 1, 5\n", "\tdelaypic 0, 1, 1\n"):
        ipu = ipu21()
        load(ipu, 2, CODE, assemble(source + "\tbr $m15\n"))
        start(ipu, [2])
        run(ipu)
        assert reg(ipu, "EXC_CAUSE") == ExceptionCause.NOT_EXECUTABLE, source


# --- around a phase -----------------------------------------------------------------------
def test_tiles_that_sit_a_phase_out_with_sans_do_not_hold_it_up() -> None:
    phases: list[dict[int, Schedule]] = [{}, {}]
    for k, rows in enumerate(phases):
        transfer(rows, 10, [11], 4, SOURCE, DESTINATION + 0x100 * k, earliest(10, [11]))
    ipu = ipu21()
    for tile in (10, 11):
        load(ipu, tile, CODE, phase_program([rows[tile].row() for rows in phases]))
    for tile in (12, 13):  # both phases sat out, then halted
        load(ipu, tile, CODE, phase_program(["\tbr $m10\n", "\tbr $m10\n"], idle=[True, True]))
    data = _payload(ipu, 10, 4)
    start(ipu, [10, 11, 12, 13])
    run(ipu)
    assert words(ipu, 11, DESTINATION, 5) == data + [0]
    assert words(ipu, 11, DESTINATION + 0x100, 5) == data + [0]
    _halted(ipu, [10, 11, 12, 13])
    assert ipu.execution.state(12).supervisor.csrs[0xAA] == 0  # $ANS_DCOUNT: both armed syncs passed


# --- a BSP all-reduce over every tile ---------------------------------------------------
ACC, STAGE, TABLE, ROWS = 0x60000, 0x61000, 0x4E000, 0x4D000
#: every tile runs this: per superstep, from its table, its role (0: sit
#: out, 1: send, 2: receive and add, 3: receive) and its row; before a
#: phase the worker barrier (runall of workers that exit, sync 2), then
#: sync 3 and the row; a receiver of the reduction adds what it received
ALL_REDUCE = f"""\
\tsetzi $m8, 0
\tput $INCOMING_BASE, $m8
\tput $OUTGOING_BASE, $m15
\tsetzi $m4, {TABLE:#x}
\tsetzi $m5, 21
loop:
\tld32 $m6, $m4, $m15, 0
\tbrz $m6, idle
\tld32 $m7, $m4, $m15, 1
\tsetzi $m0, barrier
\trunall $m0, $m15, 0
\tsync 2
\tsync 3
\tsetzi $m10, back
\tbr $m7
back:
\tcmpeq $m2, $m6, 2
\tbrz $m2, next
\tsetzi $m1, {ACC:#x}
\tsetzi $m9, {STAGE:#x}
\tld32 $m2, $m1, $m15, 0
\tld32 $m3, $m9, $m15, 0
\tadd $m2, $m2, $m3
\tst32 $m2, $m1, $m15, 0
\tbri next
idle:
\tsans 0
\tsync 1
next:
\tadd $m4, $m4, 8
\tbrnzdec $m5, loop
\tbr $m15
\t.align 8
\t.worker
barrier:
\texitz $m15
"""


def test_a_bsp_all_reduce_over_all_1472_tiles() -> None:
    # Tile t holds t + 1. Eleven supersteps of a binary tree add pairs into
    # the first of each (the rest sit out with `sans 0; sync 1`), eleven
    # more send the sum back down: every tile ends with 1472 x 1473 / 2.
    tiles = P.tiles
    rounds: list[list[tuple[int, int]]] = []
    live = list(range(tiles))
    while len(live) > 1:
        rounds.append([(live[i], live[i + 1]) for i in range(0, len(live) - 1, 2)])
        live = [r for r, _ in rounds[-1]] + ([live[-1]] if len(live) % 2 else [])
    assert len(rounds) == 11
    steps = rounds + rounds[::-1]
    roles: dict[tuple[int, int], tuple[int, bytes]] = {}
    for k, pairs in enumerate(steps):
        rows: dict[int, Schedule] = {}
        reduce = k < len(rounds)
        for first, second in pairs:
            s, r = (second, first) if reduce else (first, second)
            transfer(rows, s, [r], 1, ACC, STAGE if reduce else ACC, earliest(s, [r]))
        for tile, schedule in rows.items():
            roles[tile, k] = (1 if schedule.sends else 2 if reduce else 3, encode_row_text(schedule.row()))
    ipu = ipu21()
    program = assemble(ALL_REDUCE)
    for tile in range(tiles):
        load(ipu, tile, CODE, program)
        table = b""
        for k in range(len(steps)):
            role, row = roles.get((tile, k), (0, b""))
            load(ipu, tile, ROWS + 64 * k, row)
            table += role.to_bytes(4, "little") + (ROWS + 64 * k).to_bytes(4, "little")
        load(ipu, tile, TABLE, table)
        load(ipu, tile, ACC, (tile + 1).to_bytes(4, "little"))
    start(ipu, list(range(tiles)))
    run(ipu, budget=1 << 16)
    assert not [e for e in ipu.execution.events if e.kind == "exception"]
    assert {words(ipu, t, ACC, 1)[0] for t in range(tiles)} == {tiles * (tiles + 1) // 2}
    assert not ipu.execution.running  # every supervisor branched to 0


def test_an_ipu_whose_tiles_start_receiving_nothing_makes_no_exchange_state_until_it_runs() -> None:
    ipu = ipu21()
    start(ipu, [0, 1])  # the multiplexers hold the neutral value
    ipu.execution.reset()
    assert ipu.execution._loop is None  # no native loop, no fabric tables, no logs
    ipu.execution.state(2).supervisor.csrs[0xA0] = 5  # a start that selects a tile receives
    start(ipu, [2])
    assert ipu.execution._loop is not None and ipu.execution.exchange.receiving(2)
