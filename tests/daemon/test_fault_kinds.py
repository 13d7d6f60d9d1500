# The fault kinds' table in memory, on a model IPU (no mount): every kind
# has an example here whose effect shows in the registers (adding a kind
# means adding its row to EXAMPLES); every field refuses NaN, infinities,
# bools, strings and out-of-range numbers with a message naming it; the
# docs table is the table's rendering; the model itself never lets a value
# that does not fit a register break its stores.
from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ipufs.abi.interrupts import Interrupt
from ipufs.abi.registers import ExceptionCause
from ipufs.daemon import fault_kinds
from ipufs.daemon.fault_kinds import KINDS
from ipufs.daemon.faults import FaultError, parse
from ipufs.daemon.fields import Choice, Flag, Integer, Limits, Seconds, Words
from ipufs.model import tiles
from ipufs.model.ipu import Ipu
from tests.model.test_ipu import P, make, reg

LIMITS = Limits(ipus=2, tiles=P.tiles, contexts=P.workers_per_tile + 1)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "faults.md"

#: Each kind: a request's fields and what the model shows afterwards.
EXAMPLES: dict[str, tuple[dict[str, Any], Callable[[Ipu], bool]]] = {
    "exception": ({"cause": "misaligned", "tile": 3, "address": 0x40002, "context": 2},
                  lambda m: (reg(m, "EXC_CAUSE"), reg(m, "EXC_TILE"), reg(m, "EXC_CONTEXT")) ==
                  (ExceptionCause.MISALIGNED, 3, 2)),
    "parity": ({"tile": 5, "address": 0x40010}, lambda m: m.tiles.bad_word(5, 0x40010, 8)),
    "sync": ({"zone": "gs2-master"}, lambda m: m.interrupts.raised[Interrupt.GS2_E1] == 1),
    "icu-timeout": ({"for": 0.5}, lambda m: reg(m, "STATUS") & 8 != 0),
    "icu-recover": ({}, lambda m: reg(m, "STATUS") & 8 == 0),
    "link-down": ({}, lambda m: reg(m, "STATUS") & 4 != 0),
    "link-up": ({}, lambda m: reg(m, "STATUS") & 4 == 0),
    "link-errors": ({"count": 3}, lambda m: m.link_errors.total == 3 and reg(m, "STATUS") & 4 == 0),
    "telemetry": ({"power_mw": 0xFFFFFFFF, "clock_mhz": 0}, lambda m: (reg(m, "POWER"), reg(m, "CLOCK")) ==
                  (0xFFFFFFFF, 0)),
    "icu-message": ({"words": [1, 2, 3, 4, 0xFFFFFFFF]}, lambda m: m.interrupts.raised[Interrupt.ICU_DOORBELL] == 1),
    "reset": ({}, lambda m: reg(m, "RESET_COUNT") == 1),
    "interrupt": ({"source": "gs1-e0", "stamp": True}, lambda m: reg(m, "SCRATCH") != 0
                  and m.interrupts.raised[Interrupt.GS1_E0] == 1),
}


def test_every_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(KINDS)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_acts_on_the_model(name: str) -> None:
    fields, shows = EXAMPLES[name]
    model = make()
    timers: list[tuple[float, Callable[[], None]]] = []
    fault = parse({"kind": name, "ipu": 1, **fields}, LIMITS)
    fault.kind.action(model, fault.params, lambda s, a: timers.append((s, a)))
    assert shows(model)
    if name == "icu-timeout":
        assert [s for s, _ in timers] == [0.5]
        timers[0][1]()
        assert reg(model, "STATUS") & 8 == 0


BAD = [math.nan, math.inf, -math.inf, True, False, "1", None, [], {}, -1, 1 << 64, 0.5]


@pytest.mark.parametrize("name", list(KINDS))
def test_every_field_refuses_what_it_cannot_take_naming_itself(name: str) -> None:
    fields, _ = EXAMPLES[name]
    for f in KINDS[name].fields:
        for bad in BAD:
            if isinstance(f, Flag) and isinstance(bad, bool):
                continue
            if isinstance(f, Seconds) and bad in (False, 0.5):
                continue
            if isinstance(f, Choice) and isinstance(bad, int) and not isinstance(bad, bool) \
                    and bad in f.names.values():
                continue
            with pytest.raises(FaultError, match=rf"^{f.name} must be"):
                parse({"kind": name, **fields, f.name: bad}, LIMITS)


def test_ranges_come_from_the_registers_and_the_profile() -> None:
    top = {"kind": "telemetry", "temperature_mc": 0xFFFFFFFF}
    assert parse(top, LIMITS).params["temperature_mc"] == 0xFFFFFFFF
    for request, message in (
            ({"kind": "telemetry", "power_mw": -1}, "power_mw must be an integer 0..0xffffffff"),
            ({"kind": "telemetry", "clock_mhz": 1 << 32}, "clock_mhz must be an integer 0..0xffffffff"),
            ({"kind": "exception", "tile": 0x10000000000}, f"tile must be an integer 0..{P.tiles - 1}"),
            ({"kind": "parity", "tile": P.tiles, "address": 0}, f"tile must be an integer 0..{P.tiles - 1}"),
            ({"kind": "parity", "tile": 0, "address": 1 << 21}, "address must be an integer 0..2097151"),
            ({"kind": "exception", "context": P.workers_per_tile + 1}, "context must be"),
            ({"kind": "icu-timeout", "for": math.nan}, "for must be seconds 0..86400, got nan"),
            ({"kind": "reset", "ipu": 2}, "ipu must be an integer 0..1, got 2"),
            ({"kind": "reset", "ipu": True}, "ipu must be an integer"),
            ({"kind": "telemetry"}, "telemetry takes one or more of"),
            ({"kind": "exception", "couse": "parity"}, "exception takes no 'couse'; did you mean cause"),
            ({"kind": 7}, "unknown fault kind 7")):
        with pytest.raises(FaultError, match=re.escape(message)):
            parse(request, LIMITS)


def test_the_tile_address_width_is_the_models() -> None:
    assert fault_kinds.ADDRESS_BITS == tiles.ADDRESS_BITS


def test_the_docs_table_is_the_registry() -> None:
    assert fault_kinds.render_table() in DOCS.read_text(), "run: ./dev generate"


def test_command_line_text_is_converted_and_checked() -> None:
    temperature = KINDS["telemetry"].fields[0]
    assert isinstance(temperature, Integer) and temperature.from_text("91.5") == 91_500
    for text in ("nan", "-1", "5e9", "hot"):
        with pytest.raises(ValueError):
            temperature.from_text(text)
    duration = KINDS["icu-timeout"].fields[0]
    assert [duration.from_text(t) for t in ("2s", "500ms", "1m", "1.5")] == [2.0, 0.5, 60.0, 1.5]
    for text in ("2x", "nan", "inf", "-1s", "2d"):
        with pytest.raises(ValueError):
            duration.from_text(text)
    words = KINDS["icu-message"].fields[0]
    assert isinstance(words, Words) and words.from_text("0x62020c") == 0x62020C
    with pytest.raises(ValueError):
        words.from_text("0x100000000")


def test_the_model_refuses_values_that_do_not_fit_and_its_stores_never_fail() -> None:
    model = make()
    with pytest.raises(ValueError):
        model.set_telemetry(power_mw=-1)
    with pytest.raises(ValueError):
        model.raise_exception(ExceptionCause.INJECTED, tile=1 << 40)
    assert reg(model, "EXC_STATUS") == 0
    # Defence in depth: a value left in the model behind its API's back is
    # stored as the u32 it wraps to, and every later store still works.
    model.icu.board.power_mw = -1
    model.raise_interrupt(Interrupt.GS1_E0)
    model.sync_registers()
    assert reg(model, "POWER") == 0xFFFFFFFF
    model.set_telemetry(power_mw=5)
    assert reg(model, "POWER") == 5


def test_the_trace_sample_in_the_docs_uses_real_op_words() -> None:
    from ipufs.abi.icu import Op, op_word

    samples = re.findall(r"op=(\w+) request=\[(0x[0-9a-f]+)", DOCS.read_text())
    assert samples and all(int(word, 16) == op_word(Op[name]) for name, word in samples)
