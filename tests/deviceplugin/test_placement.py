# GetPreferredAllocation's choice, as a pure function over the groups
# `ipufs ls` lists for two M2000 boards (ipu0..3, ipu4..7).
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipufs.deviceplugin.placement import PlacementError, preferred

GROUPS = ((0, 1), (2, 3), (0, 1, 2, 3), (4, 5), (6, 7), (4, 5, 6, 7))
ALL = list(range(8))


@pytest.mark.parametrize("available,size,expected", [
    (ALL, 1, [0]),
    (ALL, 2, [0, 1]),
    (ALL, 4, [0, 1, 2, 3]),
    (ALL, 8, ALL),
    # Best fit: take from groups already broken, keep whole ones whole.
    ([1, 2, 3, 4, 5, 6, 7], 1, [1]),
    ([1, 2, 3, 4, 5, 6, 7], 2, [2, 3]),
    ([1, 2, 3, 4, 5, 6, 7], 4, [4, 5, 6, 7]),
    ([0, 1, 3, 4, 5, 6, 7], 2, [0, 1]),
    ([2, 3, 4, 5, 6, 7], 2, [2, 3]),
    ([0, 2, 3, 5, 6, 7], 2, [2, 3]),
    # No whole group of the size is free: as close together as possible.
    ([0, 2, 4, 5, 6], 4, [4, 5, 6, 0]),
    ([1, 3, 5, 7], 2, [1, 3]),
    (ALL, 3, [0, 1, 2]),
    ([0, 1, 2, 4, 5, 6, 7], 3, [0, 1, 2]),
    ([1, 2, 3, 4, 6, 7], 3, [1, 2, 3]),
])
def test_preferred(available: list[int], size: int, expected: list[int]) -> None:
    assert preferred(available, [], size, GROUPS) == sorted(expected)


def test_devices_that_must_be_included_pick_their_group() -> None:
    assert preferred(ALL, [5], 2, GROUPS) == [4, 5]
    assert preferred(ALL, [6], 4, GROUPS) == [4, 5, 6, 7]
    assert preferred(ALL, [1, 2], 2, GROUPS) == [1, 2]  # kubelet's word is final
    assert preferred(ALL, [3, 4], 3, GROUPS) == [2, 3, 4]


@pytest.mark.parametrize("available,must,size,message", [
    (ALL, [], 9, "asked for 9 IPUs, but only 8 are available"),
    ([0, 1], [], 3, "asked for 3 IPUs, but only 2 are available"),
    (ALL, [], 0, "allocation size must be positive, not 0"),
    (ALL, [0, 1, 2], 2, "3 IPUs must be included in an allocation of 2"),
    ([0, 1], [5], 2, "IPU 5 must be included but is not among the available devices"),
])
def test_requests_that_cannot_be_met(available: list[int], must: list[int], size: int, message: str) -> None:
    with pytest.raises(PlacementError, match=f"^{message}$"):
        preferred(available, must, size, GROUPS)


def test_single_ipu_boards_have_no_groups() -> None:
    assert preferred([0, 1, 2, 3], [], 2, ()) == [0, 1]


@given(st.sets(st.integers(0, 7), min_size=1), st.data())
def test_any_answer_is_a_valid_allocation(available: set[int], data: st.DataObject) -> None:
    must = data.draw(st.sets(st.sampled_from(sorted(available))))
    size = data.draw(st.integers(max(1, len(must)), len(available)))
    chosen = preferred(sorted(available), sorted(must), size, GROUPS)
    assert len(chosen) == len(set(chosen)) == size
    assert must <= set(chosen) <= available
    whole = [g for g in GROUPS if len(g) == size and set(g) <= available and must <= set(g)]
    if whole:  # a free group of the size that fits is always what is given
        assert tuple(chosen) in whole
