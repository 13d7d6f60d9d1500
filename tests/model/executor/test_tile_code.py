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


@pytest.mark.parametrize("register", [0, 1, 7, 14, 15])
@pytest.mark.parametrize("csr", [0x01, 0x70, 0x71, 0x80, 0x81, 0x90, 0xFF])
def test_get_and_put_words_are_the_tables(register: int, csr: int) -> None:
    assert tile_code.get_word(register, csr) == word("get_mmmn_zi", register, csr)
    assert tile_code.put_word(csr, register) == word("put_mmmn_zi", csr, register)


def test_bad_entries_are_refused() -> None:
    with pytest.raises(ValueError):
        tile_code.branch_word(0x40002)
    with pytest.raises(ValueError):
        tile_code.put_dbg_data_word(16)
    with pytest.raises(ValueError):
        tile_code.get_word(1, 0x100)


def test_the_register_numbers_and_context_states_are_the_models() -> None:
    from ipufs.model.executor.state import Status
    from ipufs.model.debug import TdiRegister, TdiStatus

    assert (tile_code.TDI_CTXT_STS, tile_code.TDI_DBG_IEXEC, tile_code.TDI_DBG_IOWNER, tile_code.TDI_DBG_DATA,
            tile_code.TDI_TDI_STS, tile_code.TDI_DBG_RBRK, tile_code.TDI_DBG_RBRK_VERT) == (
        TdiRegister.CTXT_STS, TdiRegister.DBG_IEXEC, TdiRegister.DBG_IOWNER, TdiRegister.DBG_DATA,
        TdiRegister.TDI_STS, TdiRegister.DBG_RBRK, TdiRegister.DBG_RBRK_VERT)
    from ipufs.model.executor import csr
    from ipufs.model.debug import breaks

    assert (tile_code.CSR_SSR, tile_code.CSR_DBG_BRK_ID, tile_code.CSR_DBG_IBRK0_CTL, tile_code.CSR_DBG_IBRK0_PC,
            tile_code.CSR_DBG_IBRK0_VERT, tile_code.CSR_DBG_DBRK0_CTL, tile_code.CSR_DBG_DBRK0_BASE) == (
        csr.SR, csr.DBG_BRK_ID, csr.IBRK_CTL, csr.IBRK_PC, csr.IBRK_VERT, csr.DBRK_CTL, csr.DBRK_BASE)
    assert (tile_code.IBRK_ENS, tile_code.IBRK_ENW) == (breaks.ENS, breaks.ENW)
    assert (tile_code.TDI_STS_CNQ, tile_code.TDI_STS_INV, tile_code.TDI_STS_DBLE, tile_code.TDI_STS_BUSY) == (
        TdiStatus.CNQ, TdiStatus.INV, TdiStatus.DBLE, TdiStatus.BUSY)
    assert (tile_code.CONTEXT_INACTIVE, tile_code.CONTEXT_ACTIVE, tile_code.CONTEXT_EXCEPTED) == (
        Status.INACTIVE, Status.ACTIVE, Status.EXCEPTED)


def test_ctxt_sts_of_a_tile_that_never_ran_shows_a_held_exception() -> None:
    from ipufs.model.debug import TdiRegister
    from tests.model.executor.kit import make, tdi_read

    ipu = make()
    ipu.raise_exception(3, tile=5, context=2)  # as a fault would, on a tile that never ran
    assert tdi_read(ipu, 5, TdiRegister.CTXT_STS) == tile_code.CONTEXT_EXCEPTED << (2 * tile_code.CONTEXT_BITS)
