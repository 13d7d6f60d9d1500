# The per-tile TDI registers of ipu1 (config space 0x30000 + tile * 0x40 +
# register * 4) on the model alone: pwrite (write_config) and mapped stores
# (words stored, then the register watcher's poll) drive the same TileDebug
# and executor as the TDI aperture, and reads show the tile's state. An
# injection shows TDI_STS.BUSY until the executor's next run retires it
# (``retire``), then the block shows its effect.
from __future__ import annotations

import struct

import pytest

from ipufs.abi.registers import REGISTERS, TdiResult
from ipufs.model.ipu import Ipu
from ipufs.model.profile import PROFILES, Region
from ipufs.model.debug import TdiRefused, TdiRegister as T, TdiStatus
from tests.model.executor.kit import assemble, load, tdi_read, tdi_write, word
from tests.model.test_ipu import make, reg, sparse

BASE = 0x30000


def at(tile: int, register: int) -> int:
    return BASE + tile * 0x40 + register * 4


def read(ipu: Ipu, tile: int, register: int) -> int:
    return struct.unpack("<I", ipu.read_config(at(tile, register), 4))[0]


def write(ipu: Ipu, tile: int, register: int, value: int) -> None:
    assert ipu.write_config(at(tile, register), struct.pack("<I", value)) == 4


def store(ipu: Ipu, tile: int, register: int, value: int) -> None:
    """A store through a mapping: no model code runs until the watcher polls."""
    ipu.config.words[at(tile, register) // 4] = value


def retire(ipu: Ipu, *tiles: int) -> None:
    """The injections into ``tiles`` are busy until the executor next
    runs (the daemon's executor task: its next slice); then the block shows
    them retired, with no TDI command or poll."""
    for tile in tiles:
        assert read(ipu, tile, T.TDI_STS) == TdiStatus.BUSY
    ipu.execution.run(0)
    for tile in tiles:
        assert read(ipu, tile, T.TDI_STS) == 0


SETZI_M3 = word("setzi_mmmn_zi", 3, 0x5A5A5)
PUT_DBG_DATA_M3 = word("put_mmmn_zi", 0x70, 3)


def test_identity_registers_say_where_the_windows_and_tile_registers_are() -> None:
    ipu = make()
    assert (reg(ipu, "TILE_EXCHANGE_BASE"), reg(ipu, "TILE_TDI_BASE")) == (0x0C00_0000, 0x30000)
    other = Ipu(PROFILES["ipu2"], 0, {r: sparse(PROFILES["ipu2"].region_size(r)) for r in Region})
    assert (reg(other, "TILE_EXCHANGE_BASE"), reg(other, "TILE_TDI_BASE")) == (0, 0x30000)


def test_tile_code_end_says_where_executable_memory_ends() -> None:
    # The GC200 fetches code below 0x80000 only (its region 1 starts
    # there), the GC2 from the first half of its SRAM.
    assert reg(make(), "TILE_CODE_END") == 0x60000
    for name in ("ipu2", "ipu21"):
        ipu = Ipu(PROFILES[name], 0, {r: sparse(PROFILES[name].region_size(r)) for r in Region})
        assert (reg(ipu, "TILE_MEM_BASE"), reg(ipu, "TILE_CODE_END")) == (0x4C000, 0x80000)


def test_an_instruction_injected_by_pwrite_carries_a_register_out_through_dbg_data() -> None:
    ipu = make()
    write(ipu, 7, T.DBG_IOWNER, 1)  # an inactive worker takes injections (A114 hover/$DBG_IEXEC.md)
    write(ipu, 7, T.DBG_IEXEC, SETZI_M3)
    assert read(ipu, 7, T.DBG_IEXEC) == 0  # taken, not yet retired
    retire(ipu, 7)
    write(ipu, 7, T.DBG_IEXEC, PUT_DBG_DATA_M3)
    assert read(ipu, 7, T.DBG_DATA) == 0
    retire(ipu, 7)
    assert read(ipu, 7, T.DBG_DATA) == 0x5A5A5
    assert tdi_read(ipu, 7, T.DBG_DATA) == 0x5A5A5  # the aperture sees the same TileDebug
    assert read(ipu, 7, T.DBG_IEXEC) == 0 and read(ipu, 7, T.TDI_STS) == 0
    assert read(ipu, 6, T.DBG_DATA) == 0 and read(ipu, 8, T.DBG_DATA) == 0


def test_mapped_stores_act_when_polled_in_the_order_of_a_hosts_sequence() -> None:
    ipu = make()
    write(ipu, 3, T.DBG_IOWNER, 2)
    write(ipu, 3, T.DBG_IEXEC, SETZI_M3)  # worker 2's $m3 = 0x5A5A5; the supervisor's stays 0
    retire(ipu, 3)
    write(ipu, 3, T.DBG_IOWNER, 0)
    # DBG_IEXEC lies below DBG_IOWNER, yet the owner found with it applies first
    store(ipu, 3, T.DBG_IEXEC, PUT_DBG_DATA_M3)
    store(ipu, 3, T.DBG_IOWNER, 2)
    store(ipu, 3, T.DBG_DATA, 0xFFFF)  # ... and the injected put, when it retires, overwrites it
    assert ipu.needs_poll()
    assert ipu.poll_registers()
    assert not ipu.needs_poll()
    assert read(ipu, 3, T.DBG_IOWNER) == 2 and read(ipu, 3, T.DBG_IEXEC) == 0
    assert read(ipu, 3, T.DBG_DATA) == 0xFFFF
    retire(ipu, 3)
    assert read(ipu, 3, T.DBG_DATA) == 0x5A5A5  # worker 2's $m3, not the supervisor's
    assert ipu.execution.states[3].contexts[2].status.value == 0
    assert not ipu.needs_poll()
    store(ipu, 3, T.DBG_DATA, 0x1234)
    ipu.poll_registers()
    assert tdi_read(ipu, 3, T.DBG_DATA) == 0x1234


def test_a_second_instruction_while_the_first_is_busy_is_refused_with_dble() -> None:
    ipu = make()
    write(ipu, 5, T.DBG_IOWNER, 1)
    store(ipu, 5, T.DBG_IEXEC, SETZI_M3)
    ipu.poll_registers()
    assert read(ipu, 5, T.TDI_STS) == TdiStatus.BUSY
    store(ipu, 5, T.DBG_IEXEC, PUT_DBG_DATA_M3)  # not waiting for BUSY to clear
    ipu.poll_registers()
    assert read(ipu, 5, T.DBG_IEXEC) == 0 and read(ipu, 5, T.TDI_STS) == TdiStatus.BUSY | TdiStatus.DBLE
    ipu.execution.run(0)
    assert read(ipu, 5, T.TDI_STS) == TdiStatus.DBLE  # the first retired; DBLE stays until cleared
    assert read(ipu, 5, T.DBG_DATA) == 0  # the put never ran
    with pytest.raises(TdiRefused) as refused:  # by pwrite too: ignored while an error flag is set
        write(ipu, 5, T.DBG_IEXEC, PUT_DBG_DATA_M3)
    assert refused.value.result == TdiResult.TDI_ERROR
    # TDI_CLR lies above DBG_IEXEC, yet found together it applies first
    store(ipu, 5, T.DBG_IEXEC, PUT_DBG_DATA_M3)
    store(ipu, 5, T.TDI_CLR, TdiStatus.DBLE)
    ipu.poll_registers()
    retire(ipu, 5)
    assert read(ipu, 5, T.DBG_DATA) == 0x5A5A5 and read(ipu, 5, T.TDI_CLR) == 0
    # pwrite while busy: refused, DBLE set, the injection accepted first still retires
    write(ipu, 5, T.DBG_IEXEC, SETZI_M3)
    with pytest.raises(TdiRefused) as refused:
        write(ipu, 5, T.DBG_IEXEC, PUT_DBG_DATA_M3)
    assert refused.value.result == TdiResult.TDI_ERROR
    assert read(ipu, 5, T.TDI_STS) == TdiStatus.BUSY | TdiStatus.DBLE
    ipu.execution.run(0)
    assert read(ipu, 5, T.TDI_STS) == TdiStatus.DBLE


def test_a_host_polling_the_mapping_sees_tdi_sts_in_step_with_what_it_waits_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The block's words are stored one by one while a host may be reading
    them: DBG_IEXEC reads 0 (taken) only after TDI_STS shows BUSY, and
    BUSY clears only after DBG_DATA shows the put's value."""
    ipu = make()
    stored: list[int] = []
    store_word = ipu.config.store_word

    def recording(index: int, value: int) -> None:
        if at(9, 0) // 4 <= index < at(10, 0) // 4:
            stored.append(index - at(9, 0) // 4)
        store_word(index, value)

    monkeypatch.setattr(ipu.config, "store_word", recording)
    write(ipu, 9, T.DBG_IOWNER, 1)
    write(ipu, 9, T.DBG_IEXEC, SETZI_M3)
    ipu.execution.run(0)
    store(ipu, 9, T.DBG_IEXEC, PUT_DBG_DATA_M3)
    stored.clear()
    ipu.poll_registers()
    assert stored == [T.TDI_STS, T.DBG_IEXEC]  # BUSY, then the store taken
    stored.clear()
    ipu.execution.run(0)
    assert stored == [T.DBG_DATA, T.TDI_STS]  # the value, then BUSY clear
    assert read(ipu, 9, T.DBG_DATA) == 0x5A5A5


def test_a_program_started_through_the_tile_registers_runs_and_shows_its_state() -> None:
    ipu = make()
    program = assemble(".text 0x40000\n.supervisor\n_start:\n  setzi $m1, 77\n  put $DBG_DATA, $m1\n"
                       "  setzi $m2, 0x60000\n  st32 $m1, $m2, $m15, 0\nloop:\n  bri loop\n")
    load(ipu, program, (1215,))
    write(ipu, 1215, T.DBG_IOWNER, 0)
    write(ipu, 1215, T.DBG_RBRK, 1)  # stopped, though inactive
    assert read(ipu, 1215, T.CTXT_STS) == 2
    write(ipu, 1215, T.DBG_IEXEC, word("bri_mmmn_zi", program.entry))
    retire(ipu, 1215)
    assert read(ipu, 1215, T.CTXT_STS) == 2  # the branch gave it a PC; it has not started
    write(ipu, 1215, T.DBG_RBRK, 0)
    write(ipu, 1215, T.DBG_ECLR, 1)
    assert read(ipu, 1215, T.CTXT_STS) == 1  # the supervisor is active
    assert read(ipu, 1215, T.DBG_DATA) == 0  # no turn taken yet
    ipu.execution.run(100)
    assert read(ipu, 1215, T.DBG_DATA) == 77  # published after the slice, no TDI command needed
    assert int(ipu.tiles.exchange.words[(0x0C00_0000 + 1215 * 0x40000 + 0x20000) // 4]) == 77
    with pytest.raises(TdiRefused) as refused:  # a running context cannot take an injection
        write(ipu, 1215, T.DBG_IEXEC, SETZI_M3)
    assert refused.value.result == TdiResult.NOT_QUIESCENT
    assert read(ipu, 1215, T.TDI_STS) == TdiStatus.CNQ
    write(ipu, 1215, T.TDI_CLR, TdiStatus.CNQ)
    assert read(ipu, 1215, T.TDI_STS) == 0
    put_reset = REGISTERS["CMD_RESET"].offset
    ipu.write_config(put_reset, struct.pack("<I", 1))
    assert read(ipu, 1215, T.CTXT_STS) == 0 and read(ipu, 1215, T.DBG_DATA) == 0


def test_an_exception_shows_in_ctxt_sts_and_dbg_eclr_clears_it() -> None:
    ipu = make()
    ipu.raise_exception(8, tile=9, context=0)
    assert read(ipu, 9, T.CTXT_STS) == 3  # raised from outside its program: not a debug exception
    write(ipu, 9, T.DBG_ECLR, 1)
    assert read(ipu, 9, T.CTXT_STS) == 0


def test_aperture_writes_show_in_the_tile_registers() -> None:
    ipu = make()
    assert tdi_write(ipu, 40, T.DBG_IOWNER, 5) == TdiResult.OK
    assert tdi_write(ipu, 40, T.TDI_CTL, 3) == TdiResult.OK
    assert (read(ipu, 40, T.DBG_IOWNER), read(ipu, 40, T.TDI_CTL)) == (5, 3)


@pytest.mark.parametrize(("tile", "register", "value", "result"), [
    (1216, T.DBG_IOWNER, 0, TdiResult.BAD_TILE),  # instances 1216..1279 hold no tile
    (1279, T.DBG_DATA, 1, TdiResult.BAD_TILE),
    (0, T.CTXT_STS, 1, TdiResult.BAD_REGISTER),  # read-only
    (0, T.EXCHANGE_CTL, 1, TdiResult.BAD_REGISTER),  # the C600's: a mirror of $EXCHANGE_CTL
    (0, 0xF, 1, TdiResult.BAD_REGISTER),
    (0, T.DBG_IOWNER, 7, TdiResult.BAD_VALUE),
])
def test_refused_writes_say_why_and_leave_the_registers_as_they_were(tile: int, register: int, value: int,
                                                                      result: TdiResult) -> None:
    ipu = make()
    with pytest.raises(TdiRefused) as refused:
        write(ipu, tile, register, value)
    assert refused.value.result == result
    assert read(ipu, tile, register) == 0
    if tile < 1216:
        assert read(ipu, tile, T.TDI_STS) & TdiStatus.INV
    # the same store through a mapping is undone at the next poll
    ipu = make()
    store(ipu, tile, register, value)
    ipu.poll_registers()
    assert read(ipu, tile, register) == 0 and not ipu.needs_poll()


def test_partial_and_multi_word_writes() -> None:
    ipu = make()
    with pytest.raises(TdiRefused) as refused:
        ipu.write_config(at(0, T.DBG_DATA) + 1, b"\x01\x02\x03\x04")
    assert refused.value.result == TdiResult.BAD_WIDTH
    with pytest.raises(TdiRefused):
        ipu.write_config(at(0, T.DBG_DATA), b"\x01\x02")
    # TDI_CTL then the end of the tile's registers: the first is done, the write ends short
    assert ipu.write_config(at(0, T.TDI_CTL), struct.pack("<II", 4, 1)) == 4
    assert read(ipu, 0, T.TDI_CTL) == 4
    # a write that starts in ordinary config space and ends in the block
    assert ipu.write_config(BASE - 4, struct.pack("<II", 0xABCD, 6)) == 4  # CTXT_STS refused
    assert (ipu.config.words[BASE // 4 - 1], read(ipu, 0, T.CTXT_STS)) == (0xABCD, 0)
    assert ipu.write_config(BASE - 4, struct.pack("<I", 0xABCE)) == 4
    assert ipu.write_config(at(2, T.DBG_DATA), struct.pack("<II", 9, 10)) == 4  # TDI_STS (read-only) refused
    assert read(ipu, 2, T.DBG_DATA) == 9 and read(ipu, 2, T.TDI_STS) == TdiStatus.INV


def test_a_persistent_config_bar_forgets_old_tile_registers() -> None:
    memory = {r: sparse(PROFILES["ipu1"].region_size(r)) for r in Region}
    memory[Region.CONFIG].words[at(4, T.DBG_DATA) // 4] = 123  # left by an earlier daemon
    ipu = make(memory)
    assert read(ipu, 4, T.DBG_DATA) == 0 and not ipu.needs_poll()


def test_retirement_breaks_are_armed_through_the_block_by_pwrite_and_by_mapped_store() -> None:
    for by_store in (False, True):
        ipu = make()
        (store if by_store else write)(ipu, 3, T.DBG_RBRK_VERT, 0x61020)
        (store if by_store else write)(ipu, 3, T.DBG_RBRK, 0x80000001)
        if by_store:
            ipu.poll_registers()
        b = ipu.execution.interpreter.breaks[3]
        assert (b.rbrk, b.rbrk_vert) == (0x80000001, 0x61020)
        assert (read(ipu, 3, T.DBG_RBRK), read(ipu, 3, T.DBG_RBRK_VERT)) == (0x80000001, 0x61020)
        (store if by_store else write)(ipu, 3, T.DBG_RBRK, 0)
        if by_store:
            ipu.poll_registers()
        assert 3 not in ipu.execution.interpreter.breaks
