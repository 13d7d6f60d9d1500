# Assembler source text to the items the first pass reads, in order, as
# llvm-mc's lexer cuts them: comments (`#` and `//` to the end of the line,
# `/* ... */` over lines) dropped, statements separated by newlines and `;`,
# labels (`name:`, and `1:` local labels) before a statement, and a
# bundle's braces `{` and `}` before or after one.
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_LABEL = re.compile(r"\s*([A-Za-z_.$][\w.$]*|\d+)\s*:(?![:\w])")


@dataclass(frozen=True, slots=True)
class Item:
    """One thing on a line: ``kind`` "label" (``text`` its name), "open",
    "close" or "statement" (``text`` the statement)."""

    line: int
    kind: str
    text: str = ""


def items(text: str) -> Iterator[Item]:
    """The items of a whole source text."""
    in_comment = False
    for number, raw in enumerate(text.splitlines(), 1):
        line, in_comment = _strip_comments(raw, in_comment)
        for piece in line.split(";"):
            yield from _piece(number, piece.strip())


def _strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """The line without comments, and whether a /* comment goes on."""
    out: list[str] = []
    at = 0
    quoted = False
    while at < len(line):
        if in_comment:
            end = line.find("*/", at)
            if end < 0:
                return "".join(out), True
            at, in_comment = end + 2, False
            out.append(" ")
            continue
        ch = line[at]
        if ch == '"':
            quoted = not quoted
        elif not quoted and (ch == "#" or line.startswith("//", at)):
            break
        elif not quoted and line.startswith("/*", at):
            in_comment, at = True, at + 2
            continue
        out.append(ch)
        at += 1
    return "".join(out), in_comment


def _piece(number: int, text: str) -> Iterator[Item]:
    while True:
        m = _LABEL.match(text)
        if m:
            yield Item(number, "label", m.group(1))
            text = text[m.end():].strip()
        elif text.startswith("{"):
            yield Item(number, "open")
            text = text[1:].strip()
        else:
            break
    closing = 0
    while text.endswith("}"):
        closing += 1
        text = text[:-1].strip()
    if text:
        yield Item(number, "statement", text)
    for _ in range(closing):
        yield Item(number, "close")
