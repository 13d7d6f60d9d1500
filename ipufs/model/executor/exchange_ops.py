# Semantics of the exchange instructions (the supervisor's): delay,
# delaypic, delayxpic, send, sendoff, sendpic, sendpicp, and sans. Each
# takes its count + 1 exchange events (and as many turns), sends one word
# per event, and makes its control writes at the events the reference
# gives: delaypic/delayxpic at their last event, sendpic/sendpicp at their
# first. Encodings and event rules: osmarks/ipu-stack
# docs/EXCHANGE_INSTRUCTION_REFERENCE.md (X below, with its lines). The
# exchange's C code (native/src/executor_exchange.h) runs them, on either
# path; the native loop takes all but sendpicp (six operands). What a
# selector writes is inferred (docs/exchange.md).
from __future__ import annotations

from typing import TYPE_CHECKING

from ipufs.model.executor import native_exchange as nx
from ipufs.model.executor.rule import Handler, Rule

if TYPE_CHECKING:
    from ipufs.model.executor.ports import Machine
    from ipufs.model.executor.state import Context, TileState

X = "osmarks/ipu-stack docs/EXCHANGE_INSTRUCTION_REFERENCE.md lines {}"


def _op(op: int, mnemonic: str) -> Handler:
    """The handler of exchange instruction ``op``: the exchange's C code runs it."""
    def handler(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
        ex.exchange.issue(t, c, op, o, mnemonic)
    return handler


def _sans(ex: Machine, t: TileState, c: Context, o: tuple[int, ...]) -> None:
    ex.arm(t, o[0] + 1)


RULES: dict[str, Rule] = {
    "delay_mmmn_zi": Rule(_op(nx.XX_DELAY, "delay"), "S (encoding); N + 1 turns and exchange events: "
                          + X.format("42-51, 60-61"), "delay"),
    "delaypic_mmmn_zi": Rule(_op(nx.XX_DELAYPIC, "delaypic"), X.format("63-67, 44-46") + " (PIC at its last "
                             "event; selector 0 the pointer, 1 the format: inferred)", "delaypic"),
    "delayxpic_mmmn_zi": Rule(_op(nx.XX_DELAYXPIC, "delayxpic"), X.format("69-73, 44-46") + " (XPIC at its "
                              "last event; selector 0 $INCOMING_MUX: inferred)", "delayxpic"),
    "send_mmmn_zi": Rule(_op(nx.XX_SEND, "send"), X.format("75-79, 95-101") + " (address in words from "
                         "$OUTGOING_BASE: inferred)", "send"),
    "sendoff_mmmn_zi": Rule(_op(nx.XX_SENDOFF, "sendoff"), X.format("81-86") + " (continues the stream, "
                            "skipping DELTA items: inferred)", "sendoff"),
    "sendpic_mmmn_zi": Rule(_op(nx.XX_SENDPIC, "sendpic"), X.format("88-92, 46-48") + " (the stream's sctl; "
                            "its write at its first event)", "sendpic"),
    "sendpicp_mmmn_zi_bf_zi_zi": Rule(_op(nx.XX_SENDPICP, "sendpicp"), X.format("113-143, 46-48")
                                      + " (both writes at its first event; sctl 0 transmits nothing)"),
    "sans_mmmn_zi": Rule(_sans, "R docs/instructions.md (encoding); arms N + 1 automatic sync requests: inferred "
                         "(A114 hover/$ANS_DCOUNT.md, the runtimes' `sans 0; sync 1`)"),
}
