# Nesting is refused before the parsers recurse: a field nested past the
# limit is named, whatever the depth (30,000 levels are a RecursionError
# inside json and tomllib); brackets inside strings and comments, and
# TOML's table headers, do not count.
from __future__ import annotations

import json

import pytest

from ipufs.daemon.control.protocol import RequestRefused, decode
from ipufs.daemon.faults import FaultError
from ipufs.daemon.nesting import MAX_DEPTH, TooDeep, check_json, check_toml
from ipufs.daemon.plan import FaultPlan

DEEP = 30_000


def nested(depth: int, open_: str = "[", close: str = "]", inner: str = "1") -> str:
    return open_ * depth + inner + close * depth


def test_a_request_nested_30000_deep_is_refused_naming_the_field() -> None:
    line = b'{"op": "inject", "kind": "icu-message", "words": ' + nested(DEEP).encode() + b"}"
    with pytest.raises(RequestRefused, match=f"^words nests more than {MAX_DEPTH} levels deep"):
        decode(line)


def test_a_plan_nested_30000_deep_is_refused_naming_the_key() -> None:
    for value in (nested(DEEP), "{a = " + nested(DEEP, "{b = ", "}", "1") + "}"):
        text = f'seed = 1\n[[fault]]\nkind = "reset"\nat = {value}\n'
        with pytest.raises(FaultError, match=f"^at nests more than {MAX_DEPTH} levels deep"):
            FaultPlan.parse(text, None)  # type: ignore[arg-type]  # refused before the limits matter


def test_the_limit_is_exact() -> None:
    check_json(json.dumps({"op": "x", "words": json.loads(nested(MAX_DEPTH))}))
    with pytest.raises(TooDeep, match="^words "):
        check_json(json.dumps({"op": "x", "words": json.loads(nested(MAX_DEPTH + 1))}))
    check_toml(f"words = {nested(MAX_DEPTH)}\n")
    with pytest.raises(TooDeep, match="^words "):
        check_toml(f"words = {nested(MAX_DEPTH + 1)}\n")


def test_brackets_in_strings_comments_and_headers_do_not_count() -> None:
    many = "[" * 100 + "{" * 100
    check_json(json.dumps({"op": many, "kinds": [many, many], "x": '\\"' + many}))
    check_toml(f'# {many}\n[[fault]]\nkind = "{many}"\nname = \'{many}\'\n'
               f'text = """\n{many}\n"""\nraw = \'\'\'{many}\'\'\'\n[[fault]]\nwords = [[1], [2]]  # {many}\n'
               + "[[fault]]\n" * 40)


def test_what_nests_too_deep_inside_an_inline_table_is_named_by_its_top_level_key() -> None:
    with pytest.raises(TooDeep, match="^outer "):
        check_toml("[[fault]]\nouter = { inner = " + nested(MAX_DEPTH) + " }\n")
