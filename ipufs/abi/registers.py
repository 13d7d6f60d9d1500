# The config space (ipuN) register map, as one table, documented in
# docs/registers.md and exported to native/include/ipufs/ipu.h, both
# generated from this table. The blocks from 0x2000 are where a real C600
# has them, as a runtime that drives one observed (osmarks/ipu-stack,
# crates/ipu-driver/src/lib.rs: CCSR, the autoloader, the host sync marks,
# the exchange window and the exchange-buffer controls); the blocks below
# 0x2000 are ipufs's own, at offsets that runtime and the C600 configuration
# it captured never touch.
#
# Every register is a little-endian u32 at a 4-byte aligned offset. Command
# registers (block DOORBELL) are how a host makes the device act: it writes
# a non-zero value, the device acts and writes 0 back. A pwrite acts before
# it returns; a store through a mapping is noticed by the daemon's register
# watcher within the poll interval (docs/registers.md).
from __future__ import annotations

import enum
import errno
from dataclasses import dataclass


class Access(enum.Enum):
    RO = "ro"  # read-only: host writes are ignored
    RW = "rw"  # read-write, no side effect
    RWS = "rw+"  # read-write; a write has the side effect described
    CMD = "cmd"  # command: write non-zero to act; reads 0 when done


@dataclass(frozen=True, slots=True)
class Register:
    name: str
    offset: int
    access: Access
    doc: str

    @property
    def index(self) -> int:
        """Index of the register in a u32 view of the BAR."""
        return self.offset // 4


@dataclass(frozen=True, slots=True)
class Block:
    name: str
    offset: int
    doc: str
    registers: tuple[Register, ...]


def _block(name: str, offset: int, doc: str, *regs: tuple[str, int, Access, str]) -> Block:
    return Block(name, offset, doc, tuple(Register(n, offset + o, a, d) for n, o, a, d in regs))


RO, RW, RWS, CMD = Access.RO, Access.RW, Access.RWS, Access.CMD

BLOCKS: tuple[Block, ...] = (
    _block(
        "IDENTITY", 0x0000, "what the device is (read-only; from the profile and board)",
        ("VENDOR_ID", 0x00, RO, "PCI vendor id: 0x1d95 (Graphcore)"),
        ("DEVICE_ID", 0x04, RO, "PCI device id of the profile"),
        ("ARCH", 0x08, RO, "architecture: 1 = ipu1, 2 = ipu2, 21 = ipu21"),
        ("TILE_COUNT", 0x0C, RO, "tiles"),
        ("SRAM_PER_TILE", 0x10, RO, "bytes of SRAM per tile"),
        ("WORKERS_PER_TILE", 0x14, RO, "worker contexts per tile (plus one supervisor)"),
        ("BOARD_TYPE", 0x18, RO, "board: 1 = C2, 2 = M2000, 3 = C600"),
        ("BOARD_VARIANT", 0x1C, RO, "board variant number"),
        ("BOARD_SERIAL_LO", 0x20, RO, "board serial number, low 32 bits (the serial's 14 digits as one integer)"),
        ("BOARD_SERIAL_HI", 0x24, RO, "board serial number, high 32 bits"),
        ("BOARD_IPU_INDEX", 0x28, RO, "this IPU's index on its board"),
        ("FIRMWARE_VERSION", 0x2C, RO, "ICU firmware: major << 16 | minor << 8 | revision"),
        ("BOOTLOADER_VERSION", 0x30, RO, "ICU bootloader: major << 16 | minor << 8 | revision"),
        ("LINK_SPEED", 0x34, RO, "PCIe link speed in units of 0.1 GT/s (80 = 8 GT/s)"),
        ("LINK_WIDTH", 0x38, RO, "PCIe link width (lanes)"),
        ("NUMA_NODE", 0x3C, RO, "NUMA node of the device"),
        ("PARITY_INIT", 0x40, RO, "1: tile memory parity is initialised"),
        ("TILE_MEM_BASE", 0x44, RO, "first populated tile address"),
        ("TILE_WINDOW", 0x48, RO, "stride of a tile's window in ipuN_ex (a power of two)"),
        ("GROUP_SIZE", 0x4C, RO, "IPUs taking part in GS2 with this one (its board)"),
        ("TILE_EXCHANGE_BASE", 0x50, RO, "offset in ipuN_ex of tile 0's window; tile T's is at "
                                         "TILE_EXCHANGE_BASE + T * TILE_WINDOW"),
        ("TILE_TDI_BASE", 0x54, RO, "offset in ipuN of tile 0's TDI registers; tile T's register R is at "
                                    "TILE_TDI_BASE + T * 0x40 + R * 4; 0: none (the TDI aperture only)"),
        ("TILE_CODE_END", 0x58, RO, "first tile address past executable memory (region 0): code lies in "
                                    "TILE_MEM_BASE .. TILE_CODE_END"),
    ),
    _block(
        "CONTROL", 0x0100, "status of the whole device",
        ("STATUS", 0x00, RO, "bit 0 READY; bit 1 EXCEPTION (an exception is held); bit 2 LINK_DOWN; "
                             "bit 3 ICU_UNRESPONSIVE"),
        ("ERROR_STATE", 0x04, RO, "0: no errors; else the cause of the held exception"),
        ("RESET_COUNT", 0x08, RO, "device resets so far (ioctl, register, ICU)"),
        ("SCRATCH", 0x0C, RW, "free for the host; cleared by reset"),
    ),
    _block(
        "EXCEPTION", 0x0200, "the first exception since the last clear (held until cleared)",
        ("EXC_STATUS", 0x00, RO, "bit 0: an exception is held"),
        ("EXC_CAUSE", 0x04, RO, "cause (docs/registers.md, exception causes)"),
        ("EXC_TILE", 0x08, RO, "tile of the held exception"),
        ("EXC_ADDRESS", 0x0C, RO, "tile address of the held exception"),
        ("EXC_CONTEXT", 0x10, RO, "context: 0 supervisor, 1..6 workers"),
        ("EXC_COUNT", 0x14, RO, "exceptions raised since the last clear"),
    ),
    _block(
        "INTERRUPT", 0x0300, "the six interrupt sources (bit n: signal 44 + n)",
        ("INT_MASK", 0x00, RWS, "bit set: source masked; a pwrite by the attached process is the same as "
                                "MASK/UNMASK_INTERRUPT (EPERM for others); a mapped store is undone"),
        ("INT_PENDING", 0x04, RO, "sources raised while masked, not yet delivered"),
        ("INT_RAISED", 0x08, RO, "sources raised since reset (sticky; reset clears it)"),
    ),
    _block(
        "SYNC", 0x0400, "global syncs (zones as in the IPU's sync zones)",
        ("SYNC_STATUS", 0x00, RO, "bit 0 WAITING for the group; bit 1 ERROR (bad zone or busy); "
                                  "bits 8..15 the last zone completed"),
        ("SYNC_GS1_COUNT", 0x04, RO, "GS1 syncs completed"),
        ("SYNC_GS2_COUNT", 0x08, RO, "GS2 syncs completed"),
    ),
    _block(
        "TELEMETRY", 0x0500, "board and IPU telemetry",
        ("TEMPERATURE", 0x00, RO, "IPU temperature, millidegrees Celsius"),
        ("POWER", 0x04, RO, "board power, milliwatts"),
        ("CLOCK", 0x08, RO, "IPU clock, MHz"),
        ("UTILISATION", 0x0C, RO, "share of the tiles' time with an active context over the last second, "
                                  "in hundredths of a percent (0..10000; docs/execution.md)"),
        ("IPU_POWER", 0x10, RO, "the IPU's power from the power model, milliwatts; 0 on boards that measure "
                                "no single IPU (docs/monitoring.md)"),
    ),
    _block(
        "DOORBELL", 0x0800, "command registers: write non-zero, the device acts and clears them",
        ("CMD_RESET", 0x00, CMD, "write 1: reset the device (as the RESET ioctl)"),
        ("CMD_EXC_CLEAR", 0x04, CMD, "write 1: clear the held exception"),
        ("CMD_SYNC", 0x08, CMD, "write a zone (4..7 slave, 12..15 master): request a sync"),
        ("CMD_ICU", 0x0C, CMD, "write 1: the ICU serves the mailbox's request ring"),
        ("CMD_TDI", 0x10, CMD, "write a TDI command (1..4): run it on the TDI aperture"),
    ),
    _block(
        "TDI", 0x1000, "the tile debug interface aperture",
        ("TDI_TILE", 0x00, RW, "tile the next TDI command addresses"),
        ("TDI_REG", 0x04, RW, "tile debug register for commands 1 and 2"),
        ("TDI_ADDRESS", 0x08, RW, "tile address for commands 3 and 4"),
        ("TDI_WIDTH", 0x0C, RW, "access width in bytes for 3 and 4: 1, 2, 4 or 8"),
        ("TDI_DATA_LO", 0x10, RW, "data, low 32 bits"),
        ("TDI_DATA_HI", 0x14, RW, "data, high 32 bits"),
        ("TDI_RESULT", 0x18, RO, "result of the last command (docs/registers.md)"),
    ),
    _block(
        "HOST_CONTROL", 0x2000, "the C600's control and autoloader registers (osmarks/ipu-stack)",
        ("CCSR", 0x00, RW, "control and status: bit 1 NO_SNOOP, bit 10 EXCHANGE_LINK_ECRC_ENABLE (held)"),
        ("AUTOLD_CSR", 0x68, RWS, "the autoloader: bit 8 GO (reads 1 while it works), bit 20 DATA_PRESENT, "
                                  "bits 9..19 the last tile, bits 0..5 the load pointer (docs/registers.md)"),
        ("AUTOLD_TARGET", 0x6C, RW, "where the autoloader loads: bits 20.. zone, bits 10..19 and 0..9 sizes "
                                    "in KiB (docs/registers.md)"),
        ("AUTOLD_DATA", 0x70, RWS, "write: push a word of the image into the autoloader (reads 0)"),
    ),
    _block(
        "HOST_SYNC", 0x3000, "the C600's host sync marks and exchange window (osmarks/ipu-stack)",
        ("HSP_GS1_CONTROL", 0x2C, RWS, "GS1 host sync mark (low 16 bits): releases the host grants the tiles' "
                                       "GS1 syncs; reads what is left (docs/registers.md)"),
        ("HSP_GS2_CONTROL", 0x30, RWS, "GS2 host sync mark (low 16 bits), as HSP_GS1_CONTROL for GS2"),
        ("EXCHANGE_WINDOW_BASE", 0x44, RW, "the host exchange window: bit 11 HEXOPT (held)"),
    ),
    _block(
        "EXCHANGE_BUFFERS", 0x5400, "the C600's exchange-buffer controls (DCXCR), 16 instances (held)",
        *((f"DCXCR{i}", 0x04 + 0x400 * i, RW, "exchange-buffer control: request ids (held)") for i in range(8)),
        *((f"DCXCR{i}", 0x1B804 - 0x5400 + 0x400 * (i - 8), RW, "exchange-buffer control (held)")
          for i in range(8, 16)),
    ),
)

BLOCK: dict[str, Block] = {b.name: b for b in BLOCKS}
REGISTERS: dict[str, Register] = {r.name: r for b in BLOCKS for r in b.registers}
BY_OFFSET: dict[int, Register] = {r.offset: r for r in REGISTERS.values()}
#: The command registers, one contiguous run: [start, end) in bytes.
DOORBELL_SPAN = (BLOCK["DOORBELL"].registers[0].offset, BLOCK["DOORBELL"].registers[-1].offset + 4)

def effect_spans(tdi_base: int | None, tdi_span: int) -> list[tuple[int, int]]:
    """The byte ranges of config space whose stores have side effects (a
    block with any register that is not plain read-write, and the per-tile
    TDI registers): what the compatibility library makes exact MMIO
    through a mapping (docs/compat.md)."""
    spans = [(b.offset, b.registers[-1].offset + 4) for b in BLOCKS
             if any(r.access is not Access.RW for r in b.registers)]
    if tdi_base is not None:
        spans.append((tdi_base, tdi_base + tdi_span))
    return spans


#: The per-tile TDI registers (docs/registers.md, profiles that have them):
#: one TDI_TILE_STRIDE of config space per tile instance, registers of
#: TDI_REGISTER_WIDTH bytes (research/ipu1/ipu1_consts.c: SOC_IPU_MEM_TILE_STRIDE,
#: TDBG_TDI_REGISTER_WIDTH; TDBG_TDI_APERTURE_SPACE = 16 registers fill the stride).
TDI_TILE_STRIDE = 0x40
TDI_REGISTER_WIDTH = 4

ARCH_CODES = {"ipu1": 1, "ipu2": 2, "ipu21": 21}
BOARD_CODES = {"C2": 1, "M2000": 2, "C600": 3}


class TdiCommand(enum.IntEnum):
    READ_REG = 1
    WRITE_REG = 2
    READ_MEM = 3
    WRITE_MEM = 4


class TdiResult(enum.IntEnum):
    OK = 0
    MISALIGNED = 1  # an exception was raised
    PARITY = 2  # an exception was raised
    UNSUPPORTED = 3  # DBG_IEXEC: the word cannot be injected (not an instruction, sync, half a bundle)
    BAD_REGISTER = 4
    BAD_TILE = 5
    BAD_COMMAND = 6
    BAD_VALUE = 7
    BAD_WIDTH = 8
    NOT_QUIESCENT = 9  # DBG_IEXEC: the DBG_IOWNER context is active (TDI_STS.CNQ)
    TDI_ERROR = 10  # DBG_IEXEC ignored: an error flag of TDI_STS is set (clear it with TDI_CLR)
    NO_MEMORY = 11  # a memory command's address is not tile memory (an exception was raised)


#: The errno a pwrite of a per-tile TDI register fails with when the TDI
#: refuses it (the C header's ipufs_tdi_errno_() gives the same); EIO for
#: any other refusal.
TDI_ERRNOS: dict[TdiResult, int] = {
    TdiResult.UNSUPPORTED: errno.EOPNOTSUPP,
    TdiResult.BAD_REGISTER: errno.EINVAL,
    TdiResult.BAD_TILE: errno.ERANGE,
    TdiResult.BAD_VALUE: errno.EINVAL,
    TdiResult.BAD_WIDTH: errno.EINVAL,
    TdiResult.NOT_QUIESCENT: errno.EBUSY,
}


class ExceptionCause(enum.IntEnum):
    """Causes ipufs reports in EXC_CAUSE (ipufs's own numbering)."""

    NONE = 0
    MISALIGNED = 1  # a load or store not naturally aligned
    PARITY = 2  # a memory parity error on a read
    INVALID_ADDRESS = 3
    INVALID_INSTRUCTION = 4
    SYNC = 5  # a sync request that cannot be served
    LINK = 6  # a link went down
    ICU = 7  # the ICU stopped answering
    INJECTED = 8  # raised by a test through the fault API
    BREAKPOINT = 9  # a tile ran `trap` (ETYPE PBRK0/1) or hit a breakpoint (IBRK, DBRK, RBRK)
    INVALID_OPERATION = 10  # a tile instruction's operands are refused (bad CSR, sync zone, runall with workers active)
    NOT_EXECUTABLE = 11  # a tile ran an instruction ipufs does not execute (docs/execution.md lists them)
    INVALID_PC = 12  # a tile fetched from a misaligned PC, outside region 0, or a misaligned bundle
    FLOATING_POINT = 13  # a tile's floating-point exception enabled in $FP_CTL (INV, DIV0, OFLO)
    EXCHANGE = 14  # a tile's exchange failed: a receive error (CTXT_STS.ERERR), a bad configuration, a send's clash


STATUS_READY = 1 << 0
STATUS_EXCEPTION = 1 << 1
STATUS_LINK_DOWN = 1 << 2
STATUS_ICU_UNRESPONSIVE = 1 << 3
SYNC_WAITING = 1 << 0
SYNC_ERROR = 1 << 1
