# Semantics of the exchange instructions (the supervisor's): delay,
# delaypic, delayxpic, send, sendoff, sendpic, sendpicp, and sans. Each
# takes its count + 1 exchange events (and as many turns), sends one word
# per event, and makes its control writes at the events the reference
# gives: delaypic/delayxpic at their last event, sendpic/sendpicp at their
# first. Encodings and event rules: osmarks/ipu-stack
# docs/EXCHANGE_INSTRUCTION_REFERENCE.md (X below, with its lines); the
# timing, selection and storing of the words: exchange.py. What a
# selector writes is inferred (docs/execution.md, "Exchange").
from __future__ import annotations

from typing import TYPE_CHECKING

from ipufs.model.executor.rule import Rule

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

X = "osmarks/ipu-stack docs/EXCHANGE_INSTRUCTION_REFERENCE.md lines {}"
#: sendpic's selectors: the multiplexer, the paired one, the pointer, the format
_XPIC, _XPIC_PAIRED, _POINTER, _FORMAT = 0, 1, 2, 3


def _delay(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.advance(t, c, o[0])


def _delaypic(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.require(c, "delaypic")
    ex.exchange.advance(t, c, o[0])
    ex.exchange.pic(t, c, o[1], o[2], t.events)  # at its last event


def _delayxpic(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.require(c, "delayxpic")
    ex.exchange.advance(t, c, o[0])
    ex.exchange.xpic(t, c, o[1], o[2], t.events)


def _send(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.require(c, "send")
    ex.exchange.transmit(t, c, o[1], o[0] + 1, o[2])
    ex.exchange.advance(t, c, o[0])


def _sendoff(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.require(c, "sendoff")
    item, _ = ex.exchange.stream(t)
    ex.exchange.transmit(t, c, item + o[1], o[0] + 1, o[2])
    ex.exchange.advance(t, c, o[0])


def _sendpic(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.require(c, "sendpic")
    count, select, value = o[0] + 1, o[1], o[2]
    first = t.events + 1  # its write is at its first event
    item, sctl = ex.exchange.stream(t)
    if select in (_XPIC, _XPIC_PAIRED):
        ex.exchange.xpic(t, c, select, value & 0x1FFF, first)
    else:
        ex.exchange.pic(t, c, select - _POINTER, value, first)
    ex.exchange.transmit(t, c, item, count, sctl)
    ex.exchange.advance(t, c, o[0])


def _sendpicp(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.exchange.require(c, "sendpicp")
    n, item, sctl, select, xpic, pic = o
    first = t.events + 1
    ex.exchange.xpic(t, c, xpic >> 13, xpic & 0x1FFF, first)
    ex.exchange.pic(t, c, select, pic, first)
    if sctl:  # restarts the stream at `item`; sctl 0 sends nothing (X 135-143)
        ex.exchange.transmit(t, c, item, n + 1, sctl)
    ex.exchange.advance(t, c, n)


def _sans(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.arm(t, o[0] + 1)


RULES: dict[str, Rule] = {
    "delay_mmmn_zi": Rule(_delay, "S (encoding); N + 1 turns and exchange events: " + X.format("42-51, 60-61"),
                          "delay"),
    "delaypic_mmmn_zi": Rule(_delaypic, X.format("63-67, 44-46") + " (PIC at its last event; selector 0 the "
                             "pointer, 1 the format: inferred)"),
    "delayxpic_mmmn_zi": Rule(_delayxpic, X.format("69-73, 44-46") + " (XPIC at its last event; selector 0 "
                              "$INCOMING_MUX: inferred)"),
    "send_mmmn_zi": Rule(_send, X.format("75-79, 95-101") + " (address in words from $OUTGOING_BASE: inferred)"),
    "sendoff_mmmn_zi": Rule(_sendoff, X.format("81-86") + " (continues the stream, skipping DELTA items: "
                            "inferred)"),
    "sendpic_mmmn_zi": Rule(_sendpic, X.format("88-92, 46-48") + " (the stream's sctl; its write at its first "
                            "event)"),
    "sendpicp_mmmn_zi_bf_zi_zi": Rule(_sendpicp, X.format("113-143, 46-48") + " (both writes at its first "
                                      "event; sctl 0 transmits nothing)"),
    "sans_mmmn_zi": Rule(_sans, "R docs/instructions.md (encoding); arms N + 1 automatic sync requests: inferred "
                         "(A114 hover/$ANS_DCOUNT.md, the runtimes' `sans 0; sync 1`)"),
}
