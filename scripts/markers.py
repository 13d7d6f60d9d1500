# The one way the generators of `./dev generate` put generated text into a
# hand-written document: between a begin and an end marker line.
from __future__ import annotations


def between(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with what lies between ``begin`` and ``end`` made ``body``
    (ValueError when a marker is missing)."""
    head, found, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found and found_end):
        raise ValueError(f"the markers {begin!r} and {end!r} are missing")
    return f"{head}{begin}\n{body}{end}{tail}"
