# The control protocol, sans-IO: one JSON object per line each way.
# A request is {"op": NAME, ...arguments}; the answer is {"ok": true, ...}
# or {"ok": false, "error": TEXT}. Each operation declares its arguments as
# typed fields (ipufs/daemon/fields.py), checked here before its handler
# runs: an unknown argument, a wrong type or a number out of range is
# answered with a refusal naming it. docs/control.md lists the operations.
from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ipufs.daemon.fields import Field, Invalid, Limits, check_all, shown
from ipufs.daemon.nesting import TooDeep, check_json

#: The longest request line, in bytes (the newline not counted).
MAX_LINE = 64 * 1024

log = logging.getLogger(__name__)


class RequestRefused(Exception):
    """A request the daemon refuses; its text goes back to the client."""


#: Answers one request: its checked arguments and who asks (a
#: control.peers.Peer) in, the answer's fields out.
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
#: An operation that takes the connection over (a live trace): it gets the
#: checked arguments, the connection's stream and who asks, and returns
#: when the client goes away.
Stream = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


@dataclass(frozen=True)
class Operation:
    """One control operation: its arguments, and either a handler that
    answers one line or a stream that takes the connection over. Both get
    the arguments checked (defaults filled in). ``open_ended`` operations
    take more arguments than ``fields`` (inject: the fault kind's own) and
    check those themselves."""

    name: str
    fields: tuple[Field, ...]
    handler: Handler | None = None
    stream: Stream | None = None
    open_ended: bool = False

    def arguments(self, request: dict[str, Any], limits: Limits) -> dict[str, Any]:
        given = {k: v for k, v in request.items() if k != "op"}
        if self.open_ended:
            names = {f.name for f in self.fields}
            checked = check_all(self.fields, {k: v for k, v in given.items() if k in names}, limits,
                                what=self.name)
            return given | checked
        return check_all(self.fields, given, limits, what=self.name)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def refusal(error: str) -> bytes:
    return encode({"ok": False, "error": error})


def decode(line: bytes) -> dict[str, Any]:
    if len(line) > MAX_LINE:
        raise RequestRefused(f"line too long: a request is at most {MAX_LINE} bytes")
    try:
        check_json(line.decode(errors="replace"))
    except TooDeep as exc:
        raise RequestRefused(str(exc)) from None
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise RequestRefused(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise RequestRefused("a request is a JSON object")
    return message


def operation_of(operations: dict[str, Operation], request: dict[str, Any]) -> Operation:
    op = request.get("op")
    operation = operations.get(op) if isinstance(op, str) else None
    if operation is None:
        raise RequestRefused(f"unknown op {shown(op)}; known: {', '.join(sorted(operations))}")
    return operation


def parse(operations: dict[str, Operation], line: bytes, limits: Limits) -> tuple[Operation, dict[str, Any]] | bytes:
    """The operation one request line asks for and its checked arguments,
    decoded once; or, for a line that is refused, the refusal to send.
    Never raises."""
    try:
        request = decode(line)
        operation = operation_of(operations, request)
        return operation, operation.arguments(request, limits)
    except (RequestRefused, Invalid) as exc:
        return refusal(str(exc))
    except RecursionError:
        # Input nested past what the edge checks caught: bad input, so no
        # traceback (it would be hundreds of kilobytes per request).
        log.warning("control request refused: nested too deeply")
        return refusal("the request nests too deeply")


def respond(operation: Operation, arguments: dict[str, Any], line: bytes, peer: Any) -> bytes:
    """The answer line of a parsed request from ``peer`` (``line`` names it
    in the log); never raises."""
    try:
        if operation.handler is None:
            raise RequestRefused(f"{operation.name} takes a connection of its own")
        return encode({"ok": True, **operation.handler(arguments, peer)})
    except (RequestRefused, Invalid) as exc:
        return refusal(str(exc))
    except RecursionError:
        log.warning("control request refused: nested too deeply")
        return refusal("the request nests too deeply")
    except Exception as exc:
        # A handler's bug must not cost the client its answer or the
        # daemon its loop; the log keeps the traceback.
        log.exception("control request failed: %s", shown(line))
        return refusal(f"internal error: {exc!r}")


def answer(operations: dict[str, Operation], line: bytes, limits: Limits, peer: Any) -> bytes:
    """The answer line to one request line from ``peer``; never raises."""
    parsed = parse(operations, line, limits)
    return parsed if isinstance(parsed, bytes) else respond(*parsed, line, peer)
