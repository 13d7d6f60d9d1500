# The docs stay reference a reader can take in: no page of docs/ passes 500
# lines (a generated table excepted, named below), every link between them
# reaches a page and a heading that exist, and docs/performance.md is its
# template (benchmarks/performance.md.in) with a run's figures put in, so
# an edit to one without the other shows here.
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_LINES = 500
#: Pages that may be longer: tables generated whole from the code. None
#: today; a page added here says which generator writes it.
GENERATED: dict[str, str] = {}
PAGES = sorted(DOCS.glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_page_passes_500_lines(page: Path) -> None:
    lines = len(page.read_text().splitlines())
    assert lines <= MAX_LINES or page.name in GENERATED, (
        f"{page.name} has {lines} lines: split it along its topics")


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)  # no headings in code
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[tuple[str, str]]:
    """(target file, anchor) of each relative Markdown link of ``page``."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return [(target, anchor) for target, anchor in re.findall(r"\]\(([\w./-]*\.md|)(?:#([\w-]+))?\)", text)
            if target or anchor]


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md", ROOT / "CONTRIBUTING.md"],
                         ids=[*(p.name for p in PAGES), "README.md", "CONTRIBUTING.md"])
def test_every_link_reaches_a_page_and_a_heading(page: Path) -> None:
    broken = []
    for target, anchor in _links(page):
        linked = (page.parent / target).resolve() if target else page
        if not linked.exists():
            broken.append(f"{target}: no such page")
        elif anchor and anchor not in _anchors(linked):
            broken.append(f"{target}#{anchor}: no such heading")
    assert not broken, broken


def test_performance_md_is_its_template_with_a_run_put_in() -> None:
    template = (ROOT / "benchmarks" / "performance.md.in").read_text()
    pattern = "".join("(.+?)" if part.startswith("@") else re.escape(part)
                      for part in re.split(r"(@[A-Z]+@)", template) if part)
    assert re.fullmatch(pattern, (DOCS / "performance.md").read_text(), re.S), (
        "docs/performance.md differs from benchmarks/performance.md.in outside the run's figures: edit both")
