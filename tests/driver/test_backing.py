# The BAR's backing file: a clear drops exactly the pages that hold data,
# whichever way they were written, and leaves the rest of the file alone.
from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.driver import backing
from ipufs.driver.backing import DISCARD_RUNS, BackingFile

PAGE = mmap.PAGESIZE
SIZE = 64 << 20


@pytest.fixture(params=["memfd", "file"])
def bf(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackingFile]:
    f = BackingFile.memfd("test", SIZE) if request.param == "memfd" else BackingFile.file(tmp_path / "bar", SIZE)
    try:
        yield f
    finally:
        f.close()


def _write_pages(f: BackingFile, pages: list[int]) -> None:
    """Half through the file (as a passthrough pwrite), half through the
    daemon's mapping (as the model stores)."""
    for n, page in enumerate(pages):
        if n % 2:
            f.map[page * PAGE + 7] = 0xA5
        else:
            os.pwrite(f.fd, b"\xa5" * 9, page * PAGE + 100)


def _zero_everywhere(f: BackingFile, pages: list[int]) -> bool:
    return all(os.pread(f.fd, PAGE, p * PAGE) == bytes(PAGE) and f.map[p * PAGE : (p + 1) * PAGE] == bytes(PAGE)
               for p in pages)


@pytest.mark.parametrize("count", [1, DISCARD_RUNS, DISCARD_RUNS + 1, 300])
def test_a_clear_zeroes_and_frees_every_written_page(bf: BackingFile, count: int) -> None:
    pages = [3 + 37 * i for i in range(count)]  # a run each: pages apart
    _write_pages(bf, pages)
    assert bf.blocks() > 0
    bf.discard()
    assert bf.blocks() == 0  # before reading: a read through a mapping of shmem allocates
    assert _zero_everywhere(bf, pages)


def test_a_clear_of_a_range_keeps_what_lies_outside_it(bf: BackingFile) -> None:
    inside = [100 + 5 * i for i in range(DISCARD_RUNS + 4)]
    _write_pages(bf, [10, 11, *inside, 4000])
    bf.discard(100 * PAGE, 3000 * PAGE)
    assert _zero_everywhere(bf, inside)
    assert bf.map[11 * PAGE + 7] == 0xA5 and os.pread(bf.fd, 9, 10 * PAGE + 100) == b"\xa5" * 9
    assert os.pread(bf.fd, 9, 4000 * PAGE + 100) == b"\xa5" * 9


def test_data_runs_are_the_written_pages_on_page_boundaries(bf: BackingFile) -> None:
    if bf.path is not None:
        runs, complete = bf.data_runs(0, SIZE, 4)
        if runs == [(0, SIZE)]:
            pytest.skip("this file system reports no holes")
    assert bf.data_runs(0, SIZE, 4) == ([], True)
    os.pwrite(bf.fd, b"x" * (2 * PAGE), 8 * PAGE)  # pages 8 and 9
    bf.map[20 * PAGE + 1] = 1
    assert bf.data_runs(0, SIZE, 4) == ([(8 * PAGE, 10 * PAGE), (20 * PAGE, 21 * PAGE)], True)
    assert bf.data_runs(9 * PAGE, 20 * PAGE, 4) == ([(9 * PAGE, 10 * PAGE)], True)  # clipped to the range
    assert bf.data_runs(0, SIZE, 1) == ([(8 * PAGE, 10 * PAGE)], False)


def test_a_clear_drops_only_pages_that_hold_data(monkeypatch: pytest.MonkeyPatch) -> None:
    f = BackingFile.memfd("test", SIZE)
    try:
        dropped: list[tuple[int, int]] = []
        monkeypatch.setattr(BackingFile, "_drop", lambda self, start, end: dropped.append((start, end)))
        f.discard()
        assert dropped == []  # nothing written: no call (an idle IPU's reset)
        os.pwrite(f.fd, b"x", 5 * PAGE)
        f.discard()
        assert dropped == [(5 * PAGE, 6 * PAGE)]  # the one page, not the whole file
    finally:
        f.close()


def test_many_runs_are_dropped_from_the_first_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    f = BackingFile.memfd("test", SIZE)
    try:
        dropped: list[tuple[int, int]] = []
        monkeypatch.setattr(BackingFile, "_drop", lambda self, start, end: dropped.append((start, end)))
        _write_pages(f, [50 + 2 * i for i in range(backing.DISCARD_RUNS + 1)])
        f.discard()
        assert dropped == [(50 * PAGE, SIZE)]
    finally:
        f.close()
