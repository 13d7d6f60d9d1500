# One emulated IPU, composed of its parts: memory regions, config space
# registers (config_space.py), tile memory, the executor (executor/), the
# tile debug unit (debug/), the ICU, the interrupt controller and the sync
# group. It keeps the registers' meaning itself: the commands a host
# stores, the exception it holds, syncs, the fault API and reset. Hosts
# reach it through config space (read_config/write_config, and mapped
# stores noticed by poll_registers), the mailbox and the driver's ioctls.
# Pure: no I/O, no clocks; the driver calls in and takes interrupts out.
from __future__ import annotations

from operator import attrgetter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ipufs.abi import registers as R
from ipufs.abi.icu import Header
from ipufs.abi.serial import board_serial
from ipufs.model.config_space import ConfigSpace
from ipufs.model.debug import DebugUnit
from ipufs.model.host_interface import KEPT, HostInterface
from ipufs.model.icu import Board, Icu, IcuObserver
from ipufs.abi.interrupts import ALL_SOURCES, Interrupt
from ipufs.model.interrupts import InterruptController
from ipufs.model.memory import BarMemory
from ipufs.model.profile import Profile, Region
from ipufs.abi.registers import ExceptionCause
from ipufs.model.sync import HostSync, SyncGroup, interrupt_for
from ipufs.model.executor import Execution
from ipufs.model.executor.debuggee import Debuggee
from ipufs.model import power
from ipufs.model.link import LinkErrors
from ipufs.model.monitoring import Monitoring
from ipufs.model.tiles import TileMemory

REG = R.REGISTERS
_INT_MASK = REG["INT_MASK"]
#: The word of the mailbox BAR that rings the ICU.
MAILBOX_BELL = Header.DOORBELL // 4


def _check_u32(**values: int | None) -> None:
    for name, value in values.items():
        if value is not None and not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"{name} {value} does not fit a u32 register")


@dataclass(frozen=True, slots=True)
class HeldException:
    cause: int
    tile: int
    address: int
    context: int


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an IPU sits: its board and index on it, and the board's serial."""

    board: int
    index_on_board: int
    serial: int
    group_size: int


class Ipu:
    def __init__(
        self,
        profile: Profile,
        index: int,
        memory: Mapping[Region, BarMemory],
        *,
        placement: Placement | None = None,
        group: SyncGroup | None = None,
        outbox: set[int] | None = None,
        icu_observer: IcuObserver | None = None,
    ) -> None:
        for region in Region:
            if memory[region].size != profile.region_size(region):
                raise ValueError(f"{region.value} memory has the wrong size")
        self.profile = profile
        self.index = index
        self.memory = dict(memory)
        self.config = self.memory[Region.CONFIG]
        self.placement = placement or Placement(index, 0, board_serial(profile.board_type, index), 1)
        self.group = group or SyncGroup((index,), lambda member, zone: self.sync_completed(zone))
        self.interrupts = InterruptController(index=index, outbox=set() if outbox is None else outbox)
        self.tiles = TileMemory(profile, self.memory[Region.EXCHANGE])
        #: the tile debug unit: the TDI's registers, breakpoints, injections (docs/execution.md)
        self.debug = DebugUnit(profile, self.config, self.tiles, self.raise_exception)
        #: the tiles' contexts and the code they run (docs/execution.md)
        self.execution = Execution(profile, self.tiles, self, self.debug)
        self.debug.bind(Debuggee(self.execution))
        self._no_span = np.zeros(0, dtype=np.uint32)
        self.exception: HeldException | None = None
        self.exception_count = 0
        self.raised_sticky = 0
        #: SYNC_STATUS and the sync counters: this IPU's requests of its group
        self.host_sync = HostSync(index, self.group)
        self.link_down = False
        self.link_errors = LinkErrors()  # corrected on the link (the `link-errors` fault)
        self.monitoring = Monitoring(self.link_errors)  # STOP/START_MONITORING, ACCUMULATE_ERRORS
        #: UTILISATION, in hundredths of a percent: what the daemon last
        #: sampled of the tiles' work (the model reads no clocks)
        self.utilisation = 0
        self._batching = False
        self.icu = Icu(_board(profile), self.memory[Region.MAILBOX], on_reboot=self.reset, observer=icu_observer)
        # A persistent config BAR keeps its reset counter across restarts.
        self.reset_count = int(self.config.words[REG["RESET_COUNT"].index])
        self.icu.format()
        self.registers = ConfigSpace(self.config, _identity(self), _STATUS_REGISTERS, KEPT)
        #: the autoloader and the host sync marks (the C600's: docs/registers.md)
        self.host = HostInterface(self.registers, self.tiles, self.execution.start, self.command_sync)
        self.host.reset()
        self.registers.write_identity()
        self.sync_registers()

    # --- registers -----------------------------------------------------------
    def _status(self) -> list[int]:
        """The status registers' values, in the order of STATUS."""
        return [value(self) for _, value in STATUS]

    def sync_registers(self) -> None:
        """Bring every status register up to date with the model, including
        any the host stored over."""
        self.registers.store_all(self._status())
        self.debug.publish()

    def _changed(self) -> None:
        """Model state changed: show it in the registers, unless a register
        command is running (poll_registers syncs once at its end). Only the
        registers whose value changed since the last sync are stored: this
        runs between a device event and its signal, on the interrupt path."""
        if self._batching:
            return
        if self.debug.changed:
            self.debug.publish()
        registers = self.registers
        synced = registers.synced
        for slot, (_, value) in enumerate(STATUS):
            now = value(self)
            if synced[slot] != now:  # most do not move: compare before the call that stores
                registers.store(slot, now)

    def read_config(self, offset: int, length: int) -> bytes:
        """A host read of config space (pread on ipuN)."""
        return self.config.read(offset, length)

    def write_config(self, offset: int, data: bytes | memoryview) -> int:
        """A host write to config space (pwrite on ipuN): stored, then every
        register it touched takes effect before this returns. Writes to
        read-only registers are undone; offsets outside the map are plain
        memory. A write covering INT_MASK sets the mask: the driver lets
        only the attached process make one (docs/registers.md). Per-tile
        TDI registers are TDI register writes, word by word: the first
        refused raises TdiRefused, or ends the write short after others.
        Returns the count stored (short at the end of the BAR)."""
        block = self.debug.block
        if block is not None and block.overlaps(offset, len(data)):
            return block.write_spanning(offset, memoryview(data), self.write_config)
        n = self.config.write(offset, data)
        if n:
            if offset < _INT_MASK.offset + 4 and offset + n > _INT_MASK.offset:
                self.interrupts.set_mask(self.registers.get(_INT_MASK))
            self.host.wrote(offset, n)
            self.poll_registers()
        return n

    def changes_mask(self, offset: int, data: bytes | memoryview) -> bool:
        """Whether a host write would change the interrupt mask in force."""
        mask = self.registers.after_write(_INT_MASK, offset, data)
        return mask is not None and mask & ALL_SOURCES != self.interrupts.mask

    def needs_poll(self) -> bool:
        """Whether poll_registers has anything to do (only reads: any thread)."""
        block = self.debug.block
        return bool(self.icu.mailbox.words[MAILBOX_BELL] or self.registers.stored_over()
                    or (block is not None and block.changed()))

    def watched_words(self) -> tuple[object, object, object, object, int, object, object]:
        """What a detector of host stores compares (native.Watch): config
        space words, the indices and values expected there, the mailbox
        words and its DOORBELL index, and the per-tile TDI block with what
        the model stored there (empty without one)."""
        block, regs = self.debug.block, self.registers
        span = (block.words, block.expect) if block is not None else (self._no_span, self._no_span)
        return self.config.words, regs.watch_index, regs.watch_expect, self.icu.mailbox.words, MAILBOX_BELL, *span

    def poll_registers(self) -> bool:
        """Act on what the host stored in registers, by pwrite or through a
        mapping: run commands, undo stores to read-only registers and to
        INT_MASK (a store through a mapping cannot say who made it, and the
        mask is the attached process's: write_config sets it). Returns
        whether anything was done."""
        registers = self.registers
        acted = False
        self._batching = True
        try:
            if registers.doorbells_rung():
                for reg in R.BLOCK["DOORBELL"].registers:
                    value = registers.get(reg)
                    if value:
                        registers.set(reg, 0)
                        COMMANDS[reg](self, value)
                        acted = True
            if self.icu.mailbox.words[MAILBOX_BELL]:
                self.serve_mailbox()
                acted = True
            block = self.debug.block
            if block is not None and block.act():
                acted = True
            if self.host.act():
                acted = True
        finally:
            self._batching = False
        registers.write_identity()
        self.sync_registers()
        return acted

    # --- interrupts and exceptions ----------------------------------------------
    def raise_interrupt(self, source: Interrupt) -> None:
        """The device raises an interrupt source (delivered by the driver).
        The registers it moves are stored directly: this is the whole of
        the model's work between a device event and its signal."""
        self.raised_sticky |= 1 << source
        self.interrupts.raise_(source)
        if not self._batching:
            self.registers.store(_INT_RAISED, self.raised_sticky)
            self.registers.store(_INT_PENDING, self.interrupts.pending)

    def set_interrupt_mask(self, mask: int) -> None:
        self.interrupts.set_mask(mask)
        self._changed()

    def clear_interrupts(self) -> None:
        """A new owner (attach) or none (detach): all sources unmasked,
        nothing pending, and INT_MASK and INT_PENDING say so."""
        self.interrupts.clear()
        self._changed()

    def raise_exception(self, cause: int, tile: int = 0, address: int = 0, context: int = 0) -> None:
        """An exception: the first since the last clear is held in the
        EXC_* registers; every one raises the exception interrupt. Values
        that do not fit their u32 registers are refused (ValueError)."""
        _check_u32(cause=cause, tile=tile, address=address, context=context)
        self.exception_count += 1
        self.monitoring.excepted(cause)
        if self.exception is None:
            self.exception = HeldException(int(cause), tile, address, context)
        self.debug.excepted(tile, context, int(cause))
        self.raise_interrupt(Interrupt.EXCEPTION)
        self._changed()

    def clear_exception(self) -> None:
        self.exception = None
        self.exception_count = 0
        self._changed()

    # --- the ICU --------------------------------------------------------------
    def write_mailbox(self, offset: int, data: bytes | memoryview) -> int:
        """A host write to the mailbox node; a store to its DOORBELL word
        makes the ICU serve the request ring before this returns."""
        n = self.icu.host_write(offset, data)
        if self.icu.mailbox.words[MAILBOX_BELL]:
            self.serve_mailbox()
        return n

    def serve_mailbox(self) -> None:
        if self.icu.serve_ring():
            self.raise_interrupt(Interrupt.ICU_DOORBELL)

    def icu_submit(self, request: tuple[int, ...]) -> None:
        """A request by ioctl (MAILBOX_WRITE_ONLY): its answer is queued in
        the response ring and rings the doorbell."""
        if self.icu.submit(request):
            self.raise_interrupt(Interrupt.ICU_DOORBELL)

    def post_icu_message(self, message: tuple[int, ...]) -> None:
        """The fault/test API: the ICU queues an unsolicited message."""
        if self.icu.queue_response(message):
            self.raise_interrupt(Interrupt.ICU_DOORBELL)

    # --- sync ------------------------------------------------------------------
    def request_sync(self, zone: int) -> bool:
        """The tiles ask for a sync on host zone ``zone``: once the host has
        written a host sync mark for its family, it waits for a mark (the
        tiles wait meanwhile; docs/registers.md); returns False if it is
        refused (SYNC_STATUS shows SYNC_ERROR)."""
        if self.host.gates(zone):
            self.host.wait(zone)
            return True
        return self.command_sync(zone)

    def command_sync(self, zone: int) -> bool:
        """A sync on ``zone`` (CMD_SYNC, or the tiles' once a mark lets
        them); returns False if it is refused (SYNC_STATUS shows SYNC_ERROR)."""
        accepted = self.host_sync.request(zone)
        self._changed()
        return accepted

    def sync_completed(self, zone: int) -> None:
        """Called by the group when a sync this IPU asked for completes."""
        self.host_sync.completed(zone)
        self.raise_interrupt(interrupt_for(zone))
        self.execution.sync_completed(zone)
        self._changed()

    # --- the fault API -----------------------------------------------------------
    def set_link(self, up: bool) -> None:
        """A link goes down (an exception with cause LINK) or comes back."""
        if self.link_down != (not up):
            self.link_down = not up
            if self.link_down:
                self.raise_exception(ExceptionCause.LINK)
            self._changed()

    def set_icu_responsive(self, responsive: bool) -> None:
        self.icu.unresponsive = not responsive
        self._changed()

    def set_telemetry(self, *, temperature_mc: int | None = None, power_mw: int | None = None,
                      clock_mhz: int | None = None) -> None:
        """The fault API: new telemetry (None: unchanged). Values that do not
        fit their u32 registers are refused (ValueError)."""
        self.icu.board.update(temperature_mc=temperature_mc, power_mw=power_mw, clock_mhz=clock_mhz)
        self._changed()

    def set_utilisation(self, hundredths: int) -> None:
        """UTILISATION (and the IPU_POWER it implies): the share of the
        tiles' time with an active context, in hundredths of a percent, as
        the daemon's sampling found it (docs/execution.md); kept while
        monitoring is stopped."""
        if not 0 <= hundredths <= power.FULL:
            raise ValueError(f"utilisation {hundredths} is out of range 0..{power.FULL}")
        if hundredths != self.utilisation and self.monitoring.running:
            self.utilisation = hundredths
            self._changed()

    def stamp_scratch(self, monotonic_ns: int) -> None:
        """The fault API, for latency measurements: SCRATCH holds the low 32
        bits of the moment of an event (CLOCK_MONOTONIC in ns, read by the
        caller), stored directly: this runs between an event and its signal."""
        self.config.store_word(REG["SCRATCH"].index, monotonic_ns & 0xFFFFFFFF)

    # --- reset ------------------------------------------------------------------
    def reset(self) -> None:
        """A device reset (RESET ioctl, CMD_RESET, ICU Reboot): tile memory,
        parity marks, tile debug state, the held exception, the mailbox
        rings, a pending sync, pending interrupts and the sources raised
        (INT_RAISED) are cleared; the reset counter goes up. Host memory
        (ipuN_mem) and the interrupt mask stay."""
        self.execution.reset()
        self.tiles.clear()
        self.execution.set_aside(self.debug.reset())  # freed later, as the contexts are
        self.exception = None
        self.exception_count = 0
        self.host_sync.withdraw()
        self.host.reset()
        self.icu.clear()
        self.interrupts.pending = 0
        self.interrupts.take()
        self.raised_sticky = 0
        self.registers.set(REG["SCRATCH"], 0)
        self.reset_count += 1
        self._changed()


# --- the register tables -------------------------------------------------------
def _board(profile: Profile) -> Board:
    """The board an IPU of ``profile`` reports through its ICU."""
    return Board(pcb=3, bom=1, board_type=profile.board_type, firmware=(2, 5, 9), bootloader=(1, 0, 4),
                 temperature_mc=45_000, power_mw=profile.power_mw, clock_mhz=profile.clock_mhz)


def _identity(ipu: Ipu) -> dict[str, int]:
    """The identity registers' values (docs/registers.md, IDENTITY)."""
    p, where = ipu.profile, ipu.placement
    fw, bl = ipu.icu.board.firmware, ipu.icu.board.bootloader
    return {
        "VENDOR_ID": p.pci_vendor, "DEVICE_ID": p.pci_device, "ARCH": R.ARCH_CODES[p.arch],
        "TILE_COUNT": p.tiles, "SRAM_PER_TILE": p.sram_per_tile,
        "WORKERS_PER_TILE": p.workers_per_tile, "BOARD_TYPE": R.BOARD_CODES[p.board_type],
        "BOARD_VARIANT": 1, "BOARD_SERIAL_LO": where.serial & 0xFFFFFFFF,
        "BOARD_SERIAL_HI": where.serial >> 32, "BOARD_IPU_INDEX": where.index_on_board,
        "FIRMWARE_VERSION": fw[0] << 16 | fw[1] << 8 | fw[2],
        "BOOTLOADER_VERSION": bl[0] << 16 | bl[1] << 8 | bl[2],
        "LINK_SPEED": p.link_speed_tenths, "LINK_WIDTH": p.link_width, "NUMA_NODE": 0,
        "PARITY_INIT": 1, "TILE_MEM_BASE": ipu.tiles.base, "TILE_WINDOW": p.tile_window,
        "GROUP_SIZE": where.group_size, "TILE_EXCHANGE_BASE": p.exchange_tile_base,
        "TILE_TDI_BASE": p.tdi_tile_base or 0, "TILE_CODE_END": p.region1_start,
    }


def _status_word(ipu: Ipu) -> int:
    return (R.STATUS_READY | (R.STATUS_EXCEPTION if ipu.exception else 0)
            | (R.STATUS_LINK_DOWN if ipu.link_down else 0)
            | (R.STATUS_ICU_UNRESPONSIVE if ipu.icu.unresponsive else 0))


#: Every status register and where its value comes from: sync_registers
#: stores them all, _changed only those whose value moved. Checked below
#: against the register map: every read-only register outside IDENTITY,
#: and INT_MASK (the mask in force, whatever a mapping stored over it).
STATUS: tuple[tuple[R.Register, Callable[[Ipu], int]], ...] = (
    (REG["STATUS"], _status_word),
    (REG["ERROR_STATE"], lambda ipu: ipu.exception.cause if ipu.exception else 0),
    (REG["RESET_COUNT"], attrgetter("reset_count")),
    (REG["EXC_STATUS"], lambda ipu: 1 if ipu.exception else 0),
    (REG["EXC_CAUSE"], lambda ipu: ipu.exception.cause if ipu.exception else 0),
    (REG["EXC_TILE"], lambda ipu: ipu.exception.tile if ipu.exception else 0),
    (REG["EXC_ADDRESS"], lambda ipu: ipu.exception.address if ipu.exception else 0),
    (REG["EXC_CONTEXT"], lambda ipu: ipu.exception.context if ipu.exception else 0),
    (REG["EXC_COUNT"], attrgetter("exception_count")),
    (REG["INT_MASK"], attrgetter("interrupts.mask")),
    (REG["INT_PENDING"], attrgetter("interrupts.pending")),
    (REG["INT_RAISED"], attrgetter("raised_sticky")),
    (REG["SYNC_STATUS"], attrgetter("host_sync.status")),
    (REG["SYNC_GS1_COUNT"], lambda ipu: ipu.host_sync.counts[1]),
    (REG["SYNC_GS2_COUNT"], lambda ipu: ipu.host_sync.counts[2]),
    (REG["TEMPERATURE"], attrgetter("icu.board.temperature_mc")),
    (REG["POWER"], attrgetter("icu.board.power_mw")),
    (REG["CLOCK"], attrgetter("icu.board.clock_mhz")),
    (REG["UTILISATION"], attrgetter("utilisation")),
    (REG["IPU_POWER"], lambda ipu: power.ipu_power_mw(ipu.icu.board.board_type, ipu.icu.board.clock_mhz,
                                                      ipu.utilisation)),
    (REG["TDI_RESULT"], attrgetter("debug.aperture.result")),
)
_STATUS_REGISTERS = [reg for reg, _ in STATUS]
_STATUS_WORDS = tuple(reg.index for reg in _STATUS_REGISTERS)
_INT_RAISED, _INT_PENDING = _STATUS_REGISTERS.index(REG["INT_RAISED"]), _STATUS_REGISTERS.index(REG["INT_PENDING"])
_EXPECTED_STATUS = {r for b in R.BLOCKS if b.name != "IDENTITY" for r in b.registers if r.access is R.Access.RO}
if set(_STATUS_REGISTERS) != _EXPECTED_STATUS | {REG["INT_MASK"]} or len(STATUS) != len(set(_STATUS_REGISTERS)):
    raise ImportError("STATUS must list each status register of abi/registers.py once")  # fail at import

#: What each command register does when the host stores ``value`` in it
#: (poll_registers has already cleared it). Checked below: one row for
#: every register of the DOORBELL block.
COMMANDS: dict[R.Register, Callable[[Ipu, int], object]] = {
    REG["CMD_RESET"]: lambda ipu, value: ipu.reset(),
    REG["CMD_EXC_CLEAR"]: lambda ipu, value: ipu.clear_exception(),
    REG["CMD_SYNC"]: Ipu.command_sync,
    REG["CMD_ICU"]: lambda ipu, value: ipu.serve_mailbox(),
    REG["CMD_TDI"]: lambda ipu, value: ipu.debug.aperture.run(value),
}
if set(COMMANDS) != set(R.BLOCK["DOORBELL"].registers):  # fail at import, never silently
    raise ImportError(f"command registers without a handler: "
                      f"{sorted(r.name for r in set(R.BLOCK['DOORBELL'].registers) - set(COMMANDS))}")
