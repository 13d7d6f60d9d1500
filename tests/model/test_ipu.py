# The whole IPU model through its host interface (config space writes and
# reads), with plain bytearrays for memory: registers, commands, TDI,
# exceptions, parity, interrupts, reset.
from __future__ import annotations

import mmap
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipufs.abi.icu import Header, Op, op_word
from ipufs.abi.interrupts import Interrupt
from ipufs.model.ipu import Ipu
from ipufs.model.memory import BarMemory
from ipufs.model.profile import PROFILES, Region
from ipufs.abi.registers import BLOCKS, REGISTERS, ExceptionCause, TdiCommand, TdiResult
from ipufs.model.debug import TdiRegister, TdiStatus

P = PROFILES["ipu1"]


def sparse(size: int) -> BarMemory:
    """Anonymous memory that costs nothing until touched, and whose clear()
    drops its pages instead of storing 512 MiB of zeros."""
    m = mmap.mmap(-1, size)
    return BarMemory(memoryview(m), discard=lambda at, n: m.madvise(mmap.MADV_REMOVE, at, n))


def make(memory: dict[Region, BarMemory] | None = None) -> Ipu:
    memory = memory or {r: sparse(P.region_size(r)) for r in Region}
    return Ipu(P, 0, memory)


def reg(ipu: Ipu, name: str) -> int:
    return struct.unpack("<I", ipu.read_config(REGISTERS[name].offset, 4))[0]


def put(ipu: Ipu, name: str, value: int) -> None:
    assert ipu.write_config(REGISTERS[name].offset, struct.pack("<I", value)) == 4


def test_register_map_is_aligned_unique_and_inside_the_bar() -> None:
    offsets = [r.offset for r in REGISTERS.values()]
    assert len(offsets) == len(set(offsets)) and all(o % 4 == 0 and o < P.config_size for o in offsets)
    for block in BLOCKS:  # ipufs's own blocks are compact; the C600's (from 0x2000) lie where a card has them
        end = block.offset + (0x100 if block.offset < 0x2000 else 0x20000)
        assert all(block.offset <= r.offset < end for r in block.registers)
    tdi = PROFILES["ipu21"].tdi_tile_base
    assert tdi is not None and all(not tdi <= o < tdi + PROFILES["ipu21"].tdi_tile_span for o in offsets)


def test_identity_registers() -> None:
    ipu = make()
    expected = {"VENDOR_ID": 0x1D95, "DEVICE_ID": 1, "ARCH": 1, "TILE_COUNT": 1216,
                "SRAM_PER_TILE": 256 * 1024, "WORKERS_PER_TILE": 6, "BOARD_TYPE": 1,
                "LINK_SPEED": 80, "LINK_WIDTH": 16, "PARITY_INIT": 1, "TILE_MEM_BASE": 0x40000,
                "TILE_WINDOW": 0x40000, "STATUS": 1, "ERROR_STATE": 0, "CLOCK": 1600}
    assert {name: reg(ipu, name) for name in expected} == expected


def test_host_writes_to_read_only_registers_are_undone_and_scratch_is_plain() -> None:
    ipu = make()
    put(ipu, "VENDOR_ID", 0)
    put(ipu, "RESET_COUNT", 99)
    put(ipu, "SCRATCH", 0xCAFE)
    assert (reg(ipu, "VENDOR_ID"), reg(ipu, "RESET_COUNT"), reg(ipu, "SCRATCH")) == (0x1D95, 0, 0xCAFE)


def tdi(ipu: Ipu, command: TdiCommand, **fields: int) -> int:
    for name, value in fields.items():
        put(ipu, f"TDI_{name.upper()}", value)
    put(ipu, "CMD_TDI", command)
    assert reg(ipu, "CMD_TDI") == 0  # the command register clears itself
    return reg(ipu, "TDI_RESULT")


def test_tdi_reads_and_writes_tile_memory_words() -> None:
    ipu = make()
    assert tdi(ipu, TdiCommand.WRITE_MEM, tile=5, address=0x40010, width=8,
               data_lo=0x11223344, data_hi=0x55667788) == TdiResult.OK
    assert ipu.tiles.read(5, 0x40010, 8) == bytes.fromhex("4433221188776655")
    put(ipu, "TDI_DATA_LO", 0)
    assert tdi(ipu, TdiCommand.READ_MEM, address=0x80014, width=4) == TdiResult.OK  # an alias
    assert reg(ipu, "TDI_DATA_LO") == 0x55667788


def test_a_misaligned_tdi_access_raises_an_exception_with_cause_and_address() -> None:
    ipu = make()
    assert tdi(ipu, TdiCommand.READ_MEM, tile=7, address=0x40012, width=4) == TdiResult.MISALIGNED
    assert ipu.interrupts.take() == [Interrupt.EXCEPTION]
    assert (reg(ipu, "EXC_STATUS"), reg(ipu, "EXC_CAUSE"), reg(ipu, "EXC_TILE"), reg(ipu, "EXC_ADDRESS")) == (
        1, ExceptionCause.MISALIGNED, 7, 0x40012)
    assert reg(ipu, "ERROR_STATE") == ExceptionCause.MISALIGNED and reg(ipu, "STATUS") == 3
    # A second exception is counted; the first stays readable until cleared.
    assert tdi(ipu, TdiCommand.WRITE_MEM, tile=8, address=0x40001, width=2) == TdiResult.MISALIGNED
    assert (reg(ipu, "EXC_TILE"), reg(ipu, "EXC_COUNT")) == (7, 2)
    put(ipu, "CMD_EXC_CLEAR", 1)
    assert (reg(ipu, "EXC_STATUS"), reg(ipu, "EXC_COUNT"), reg(ipu, "ERROR_STATE")) == (0, 0, 0)


def test_parity_errors_on_tdi_reads() -> None:
    ipu = make()
    ipu.tiles.mark_bad_parity(3, 0x40100)
    assert tdi(ipu, TdiCommand.READ_MEM, tile=3, address=0x40104, width=4) == TdiResult.PARITY
    assert (reg(ipu, "EXC_CAUSE"), reg(ipu, "EXC_TILE"), reg(ipu, "EXC_ADDRESS")) == (
        ExceptionCause.PARITY, 3, 0x40104)
    assert tdi(ipu, TdiCommand.READ_MEM, tile=3, address=0x40108, width=8) == TdiResult.OK  # next word
    ipu.reset()
    assert tdi(ipu, TdiCommand.READ_MEM, tile=3, address=0x40100, width=8) == TdiResult.OK


def test_tdi_registers() -> None:
    ipu = make()
    assert tdi(ipu, TdiCommand.WRITE_REG, tile=2, reg=TdiRegister.DBG_DATA, data_lo=42, data_hi=1) == TdiResult.OK
    put(ipu, "TDI_DATA_LO", 0)
    assert tdi(ipu, TdiCommand.READ_REG) == TdiResult.OK
    assert (reg(ipu, "TDI_DATA_LO"), reg(ipu, "TDI_DATA_HI")) == (42, 0)  # DBG_DATA holds 32 bits (the C600's)
    assert tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.DBG_IOWNER, data_lo=3, data_hi=0) == TdiResult.OK
    assert tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.DBG_IOWNER, data_lo=7) == TdiResult.BAD_VALUE
    assert tdi(ipu, TdiCommand.READ_REG, reg=TdiRegister.CTXT_STS) == TdiResult.OK
    assert reg(ipu, "TDI_DATA_LO") == 0  # every context idle
    assert tdi(ipu, TdiCommand.READ_REG, reg=0x0D) == TdiResult.BAD_REGISTER
    assert tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.CTXT_STS) == TdiResult.BAD_REGISTER
    assert tdi(ipu, TdiCommand.READ_REG, tile=5000) == TdiResult.BAD_TILE
    assert tdi(ipu, 9, tile=2) == TdiResult.BAD_COMMAND  # type: ignore[arg-type]
    assert tdi(ipu, TdiCommand.READ_MEM, width=3) == TdiResult.BAD_WIDTH


def test_dbg_iexec_of_a_word_that_is_no_instruction_reports_unsupported_and_sets_inv() -> None:
    ipu = make()
    assert tdi(ipu, TdiCommand.WRITE_REG, tile=1, reg=TdiRegister.DBG_IOWNER, data_lo=1) == TdiResult.OK  # a worker
    assert tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.DBG_IEXEC, data_lo=0x1234) == TdiResult.UNSUPPORTED
    assert tdi(ipu, TdiCommand.READ_REG, reg=TdiRegister.TDI_STS) == TdiResult.OK
    assert reg(ipu, "TDI_DATA_LO") & TdiStatus.INV
    assert tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.TDI_CLR, data_lo=TdiStatus.INV) == TdiResult.OK
    tdi(ipu, TdiCommand.READ_REG, reg=TdiRegister.TDI_STS)
    assert reg(ipu, "TDI_DATA_LO") == 0


def test_an_exception_marks_its_context_in_ctxt_sts_and_dbg_eclr_clears_it() -> None:
    ipu = make()
    tdi(ipu, TdiCommand.WRITE_REG, tile=4, reg=TdiRegister.DBG_IOWNER, data_lo=2, data_hi=0)
    assert tdi(ipu, TdiCommand.READ_MEM, address=0x40001, width=2) == TdiResult.MISALIGNED
    assert reg(ipu, "EXC_CONTEXT") == 2
    tdi(ipu, TdiCommand.READ_REG, reg=TdiRegister.CTXT_STS)
    assert reg(ipu, "TDI_DATA_LO") == 3 << 4  # context 2 EXCEPTED_NDBG (a fault): 2 bits per context
    tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.DBG_ECLR, data_lo=1)  # the supervisor's bit: nothing to clear
    tdi(ipu, TdiCommand.READ_REG, reg=TdiRegister.CTXT_STS)
    assert reg(ipu, "TDI_DATA_LO") == 3 << 4
    tdi(ipu, TdiCommand.WRITE_REG, reg=TdiRegister.DBG_ECLR, data_lo=1 << 2)  # a fault: it cannot go on
    tdi(ipu, TdiCommand.READ_REG, reg=TdiRegister.CTXT_STS)
    assert reg(ipu, "TDI_DATA_LO") == 0


def test_interrupt_mask_register_is_the_controller_mask() -> None:
    ipu = make()
    put(ipu, "INT_MASK", Interrupt.GS1_E0.bit)
    ipu.raise_interrupt(Interrupt.GS1_E0)
    assert ipu.interrupts.take() == [] and reg(ipu, "INT_PENDING") == Interrupt.GS1_E0.bit
    put(ipu, "INT_MASK", 0)
    assert ipu.interrupts.take() == [Interrupt.GS1_E0]
    assert reg(ipu, "INT_PENDING") == 0 and reg(ipu, "INT_RAISED") == Interrupt.GS1_E0.bit


def test_sync_command_register() -> None:
    ipu = make()
    put(ipu, "CMD_SYNC", 12)
    assert ipu.interrupts.take() == [Interrupt.GS1_E1]
    assert (reg(ipu, "SYNC_GS1_COUNT"), reg(ipu, "SYNC_STATUS") >> 8) == (1, 12)
    put(ipu, "CMD_SYNC", 3)
    assert reg(ipu, "SYNC_STATUS") & 2 and ipu.interrupts.take() == []
    put(ipu, "CMD_SYNC", 6)  # GS2 in a group of one completes at once
    assert ipu.interrupts.take() == [Interrupt.GS2_E0] and reg(ipu, "SYNC_STATUS") & 2 == 0


def test_mailbox_doorbell_and_icu_command_register() -> None:
    ipu = make()
    box = ipu.icu.mailbox
    box.write(0x1000, struct.pack("<5I", op_word(Op.READ_HARDWARE_ID), 0, 0, 0, 0))
    ipu.write_mailbox(Header.REQUEST_HEAD, struct.pack("<I", 1))
    assert ipu.interrupts.take() == []  # no doorbell yet
    ipu.write_mailbox(Header.DOORBELL, struct.pack("<I", 1))
    assert ipu.interrupts.take() == [Interrupt.ICU_DOORBELL]
    assert ipu.icu.pop_response() == (0x0103, 0, 0, 0, 0)
    box.write(0x1020, struct.pack("<5I", op_word(Op.READ_CLOCK), 0, 0, 0, 0))
    box.write(Header.REQUEST_HEAD, struct.pack("<I", 2))
    put(ipu, "CMD_ICU", 1)
    assert ipu.interrupts.take() == [Interrupt.ICU_DOORBELL]
    assert ipu.icu.pop_response() == (op_word(98), 1600, 0, 0, 0)


def test_reset_by_register_clears_the_device_and_counts() -> None:
    ipu = make()
    ipu.tiles.write(9, 0x40000, b"\xff" * 8)
    ipu.raise_exception(ExceptionCause.INJECTED, 1, 2)
    put(ipu, "SCRATCH", 5)
    ipu.memory[Region.HOST_MEMORY].write(0, b"host")
    put(ipu, "CMD_RESET", 1)
    assert ipu.tiles.read(9, 0x40000, 8) == bytes(8)
    assert (reg(ipu, "RESET_COUNT"), reg(ipu, "EXC_STATUS"), reg(ipu, "SCRATCH")) == (1, 0, 0)
    assert ipu.memory[Region.HOST_MEMORY].read(0, 4) == b"host"
    assert ipu.icu.mailbox.read(0, 4) == b"ICU0"


def test_the_reset_counter_survives_a_new_model_on_the_same_memory() -> None:
    memory = {r: sparse(P.region_size(r)) for r in Region}
    first = make(memory)
    first.reset()
    first.reset()
    assert reg(make(memory), "RESET_COUNT") == 2


def test_icu_reboot_resets_the_ipu() -> None:
    ipu = make()
    ipu.icu_submit((op_word(Op.REBOOT, 8), 0, 0, 0, 0))
    assert ipu.reset_count == 1


@pytest.mark.parametrize("offset", [0, 2, 0x7FE, 0x800, 0x1003])
def test_unaligned_and_partial_register_writes_do_not_break_the_model(offset: int) -> None:
    ipu = make()
    ipu.write_config(offset, b"\xff" * 7)
    assert reg(ipu, "VENDOR_ID") == 0x1D95
    assert all(reg(ipu, r.name) == 0 for r in BLOCKS[6].registers)


# A mapped store reaches the model only through needs_poll/poll_registers (the
# register watcher): whatever word a client stores, one poll must bring the
# IPU back to a state with nothing to poll, or the watcher would act forever.
@settings(max_examples=300, deadline=None)
@given(offset=st.sampled_from(sorted({r.offset for r in REGISTERS.values()} | {0x814, 0x7FC}))
       | st.integers(0, 0x1000 // 4).map(lambda w: w * 4)
       | st.integers(0x30000 // 4, 0x44000 // 4 - 1).map(lambda w: w * 4),  # the per-tile TDI registers
       value=st.integers(0, 2**32 - 1))
def test_one_poll_settles_any_stored_word(offset: int, value: int) -> None:
    ipu = make()
    assert not ipu.needs_poll()
    ipu.config.words[offset // 4] = value  # a store through a mapping: no model code runs
    ipu.poll_registers()
    assert not ipu.needs_poll(), hex(offset)


def test_a_mapped_doorbell_or_mailbox_bell_needs_a_poll() -> None:
    ipu = make()
    ipu.config.words[REGISTERS["CMD_SYNC"].offset // 4] = 1
    assert ipu.needs_poll()
    assert ipu.poll_registers()
    assert not ipu.needs_poll()
    ipu.icu.mailbox.words[Header.DOORBELL // 4] = 1
    assert ipu.needs_poll()
    assert ipu.poll_registers()
    assert not ipu.needs_poll()


# Model changes store only the status registers whose value moved; whatever
# the sequence of events, config space must show exactly the model's state.
_OPERATIONS = st.one_of(
    st.tuples(st.just("raise_interrupt"), st.sampled_from(list(Interrupt))),
    st.tuples(st.just("set_interrupt_mask"), st.integers(0, 63)),
    st.tuples(st.just("raise_exception"), st.sampled_from(list(ExceptionCause)), st.integers(0, 1215)),
    st.tuples(st.just("clear_exception")),
    st.tuples(st.just("command_sync"), st.sampled_from([4, 5, 12, 13, 14, 15, 3])),
    st.tuples(st.just("set_link"), st.booleans()),
    st.tuples(st.just("set_icu_responsive"), st.booleans()),
    st.tuples(st.just("reset")),
)


@settings(max_examples=200, deadline=None)
@given(operations=st.lists(_OPERATIONS, max_size=12))
def test_status_registers_always_show_the_model(operations: list[tuple[object, ...]]) -> None:
    from ipufs.model.ipu import _STATUS_WORDS

    ipu = make()
    for name, *args in operations:
        getattr(ipu, str(name))(*args)
        ipu.interrupts.take()
        assert [int(ipu.config.words[i]) for i in _STATUS_WORDS] == ipu._status(), name
        assert not ipu.needs_poll(), name
