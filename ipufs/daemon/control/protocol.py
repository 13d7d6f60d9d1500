# The control protocol, sans-IO: one JSON object per line each way.
# A request is {"op": NAME, ...arguments}; the answer is {"ok": true, ...}
# or {"ok": false, "error": TEXT}. docs/control.md lists the operations.
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MAX_LINE = 64 * 1024

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlError(Exception):
    """A request the daemon refuses; its text goes back to the client."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlError(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ControlError("a request is a JSON object")
    return message


def answer(handlers: dict[str, Handler], line: bytes) -> bytes:
    """The answer line to one request line; never raises."""
    try:
        request = decode(line)
        op = request.get("op")
        handler = handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            raise ControlError(f"unknown op {op!r}; known: {', '.join(sorted(handlers))}")
        return encode({"ok": True, **handler(request)})
    except ControlError as exc:
        return encode({"ok": False, "error": str(exc)})
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return encode({"ok": False, "error": f"bad request: {exc!r}"})
