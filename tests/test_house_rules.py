# The size rules of the house (shared/STYLE.md, docs/contributing.md): no
# class over 300 lines, no module over 500 lines unless it is a literal
# data table (named here, each with what it holds). A module or class
# that grows past them is split along a concept before it lands.
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ipufs"
MAX_CLASS, MAX_MODULE = 300, 500
#: modules that are literal data tables, and what each holds
DATA_TABLES = {
    "model/isa/rows.py": "the instruction table: one row per encoding of the Colossus ISA",
}
_SOURCES = sorted(PACKAGE.rglob("*.py"))
_IDS = [str(p.relative_to(PACKAGE)) for p in _SOURCES]


@pytest.mark.parametrize("path", _SOURCES, ids=_IDS)
def test_no_module_is_longer_than_500_lines_unless_a_data_table(path: Path) -> None:
    lines = path.read_text().count("\n")
    name = str(path.relative_to(PACKAGE))
    assert lines <= MAX_MODULE or name in DATA_TABLES, f"{name} has {lines} lines: split it along a concept"


@pytest.mark.parametrize("path", _SOURCES, ids=_IDS)
def test_no_class_is_longer_than_300_lines(path: Path) -> None:
    long = [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_CLASS]
    assert not long, f"{path.relative_to(PACKAGE)}: classes over {MAX_CLASS} lines: {long}"


def test_the_data_tables_named_exist() -> None:
    assert all((PACKAGE / name).exists() for name in DATA_TABLES)
