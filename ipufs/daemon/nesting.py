# How deep a control request (JSON, RFC 8259) or a fault plan (TOML 1.0)
# nests, found before it is parsed. Both parsers recurse once per level of
# arrays and inline tables, and thousands of levels end in a RecursionError
# deep inside them; no value ipufs takes nests more than a few levels. So
# the text is scanned first, flat (strings and comments skipped, brackets
# counted), and a value nested deeper than MAX_DEPTH is refused naming its
# field (docs/control.md, docs/faults.md).
from __future__ import annotations

import re

#: The deepest a value may nest: arrays and tables (objects) within a
#: field's value, the field's own array or table counted.
MAX_DEPTH = 16


class TooDeep(ValueError):
    """A field's value nests deeper than the limit; the message names it."""


def _refusal(field: str | None, max_depth: int) -> TooDeep:
    where = f"{field}" if field else "the request"
    return TooDeep(f"{where} nests more than {max_depth} levels deep (at most {max_depth})")


def _shallow(text: str, max_depth: int) -> bool:
    """Whether ``text`` holds too few brackets to nest too deep at all (the
    usual case, decided without a scan)."""
    return text.count("[") + text.count("{") <= max_depth


#: JSON's tokens that matter: a string (whatever it holds), a bracket, a colon.
_JSON = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]', re.S)


def check_json(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse (TooDeep) a JSON request whose fields nest deeper than
    ``max_depth``; the request object itself is not counted. Malformed
    text is left for the parser to refuse."""
    if _shallow(text, max_depth + 1):
        return
    depth, last_string, field = 0, "", None
    for token in _JSON.finditer(text):
        t = token.group()
        if t in "[{":
            depth += 1
            if depth > max_depth + 1:
                raise _refusal(field, max_depth)
        elif t in "]}":
            depth -= 1
        elif t == ":":
            if depth == 1:
                field = last_string
        else:
            last_string = t[1:-1]


#: TOML's tokens that matter: comments and the four kinds of string are
#: skipped whole; brackets, braces, "=" and line ends are counted.
_TOML = re.compile(r'#[^\n]*|"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|[\[\]{}=\n]',
                   re.S)


def check_toml(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse (TooDeep) a TOML document a value of which nests deeper
    than ``max_depth``, naming its key. Table headers ([x], [[x]]) do not
    nest. Malformed text is left for the parser to refuse."""
    if _shallow(text, max_depth):
        return
    depth, line_start, key = 0, 0, None
    pos = 0
    while True:
        token = _TOML.search(text, pos)
        if token is None:
            return
        t, pos = token.group(), token.end()
        if depth == 0 and t == "[" and not text[line_start:token.start()].strip():
            end = text.find("\n", pos)  # a table header: it names tables, nests nothing
            pos = len(text) if end < 0 else end
        elif t in "[{":
            depth += 1
            if depth > max_depth:
                raise _refusal(key, max_depth)
        elif t in "]}":
            depth -= 1
        elif t == "=" and depth == 0:
            key = text[line_start:token.start()].strip()
        elif t == "\n" and depth == 0:
            line_start = pos
