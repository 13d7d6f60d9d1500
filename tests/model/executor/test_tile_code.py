# The words a host injects (ipufs/abi/tile_code.py, for clients without the
# instruction table) are the table's own encodings.
from __future__ import annotations

import pytest

from ipufs.abi import tile_code
from tests.model.executor.kit import word


@pytest.mark.parametrize("entry", [0x40000, 0x44000, 0x7FFFC, 0x100000])
def test_branch_word_is_the_tables_bri(entry: int) -> None:
    assert tile_code.branch_word(entry) == word("bri_mmmn_zi", entry)


@pytest.mark.parametrize("register", range(16))
def test_put_dbg_data_word_is_the_tables_put(register: int) -> None:
    assert tile_code.put_dbg_data_word(register) == word("put_mmmn_zi", 0x70, register)


def test_bad_entries_are_refused() -> None:
    with pytest.raises(ValueError):
        tile_code.branch_word(0x40002)
    with pytest.raises(ValueError):
        tile_code.put_dbg_data_word(16)
