# The TDI aperture: ipufs's own block of config space through which a host
# runs one TDI command at a time (docs/registers.md, "TDI"): the tile,
# register, address, width and data registers say what, CMD_TDI runs it,
# TDI_RESULT says how it went. Register commands are the debug unit's
# reads and writes; memory commands read and write tile memory as a
# debugger does (a parity mark or a misaligned address raises the tile
# exception it would).
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Protocol

from ipufs.abi import registers as R
from ipufs.abi.registers import ExceptionCause, TdiCommand, TdiResult
from ipufs.model.debug.registers import TdiRefused
from ipufs.model.debug.tile import TileDebug
from ipufs.model.memory import BarMemory
from ipufs.model.tiles import MisalignedAccess, NoMemory, TileMemory

REG = R.REGISTERS
_U32 = struct.Struct("<I")
_COMMANDS = frozenset(TdiCommand.__members__.values())
#: raise_exception(cause, tile, address, context): the IPU's
RaiseException = Callable[[int, int, int, int], None]


class Unit(Protocol):
    """The debug unit, as the aperture's register commands reach it."""

    tiles: int
    changed: set[int]

    def tile(self, tile: int) -> TileDebug: ...

    def read(self, tile: int, reg: int) -> int: ...

    def write(self, tile: int, reg: int, value: int) -> TdiResult: ...


class Aperture:
    """The TDI aperture of one IPU's config space."""

    def __init__(self, config: BarMemory, memory: TileMemory, unit: Unit,
                 raise_exception: RaiseException) -> None:
        self.config = config
        self.memory = memory
        self.unit = unit
        self.raise_exception = raise_exception
        #: TDI_RESULT: how the last command went
        self.result = 0

    def _reg(self, name: str) -> int:
        return int(self.config.words[REG[name].index])

    def _set(self, name: str, value: int) -> None:
        reg = REG[name]
        value &= 0xFFFFFFFF
        if int(self.config.words[reg.index]) != value:
            self.config.write(reg.offset, _U32.pack(value))

    def clear(self) -> None:
        """Reset: every aperture register reads 0."""
        for reg in R.BLOCK["TDI"].registers:
            self._set(reg.name, 0)
        self.result = 0

    def run(self, command: int) -> None:
        """CMD_TDI: run ``command``; TDI_RESULT shows how it went."""
        self.result = int(self.command(command))

    def command(self, command: int) -> TdiResult:
        """Run a TDI command on the aperture registers."""
        tile = self._reg("TDI_TILE")
        if command not in _COMMANDS:
            return TdiResult.BAD_COMMAND
        if not 0 <= tile < self.unit.tiles:
            return TdiResult.BAD_TILE
        unit, memory = self.unit, self.memory
        unit.changed.add(tile)  # its per-tile registers show what this does
        data = self._reg("TDI_DATA_LO") | self._reg("TDI_DATA_HI") << 32
        try:
            if command == TdiCommand.READ_REG:
                data = unit.read(tile, self._reg("TDI_REG"))
            elif command == TdiCommand.WRITE_REG:
                result = unit.write(tile, self._reg("TDI_REG"), data)
                if result != TdiResult.OK:
                    return result
            else:
                address, width = self._reg("TDI_ADDRESS"), self._reg("TDI_WIDTH")
                if width not in (1, 2, 4, 8):
                    return TdiResult.BAD_WIDTH
                if command == TdiCommand.READ_MEM:
                    if memory.bad_word(tile, address, width):
                        memory.check_alignment(address, width)
                        self.raise_exception(ExceptionCause.PARITY, tile, address, unit.tile(tile).owner)
                        return TdiResult.PARITY
                    data = int.from_bytes(memory.read(tile, address, width), "little")
                else:
                    memory.write(tile, address, (data & ((1 << 8 * width) - 1)).to_bytes(width, "little"))
        except MisalignedAccess:
            self.raise_exception(ExceptionCause.MISALIGNED, tile, self._reg("TDI_ADDRESS"), unit.tile(tile).owner)
            return TdiResult.MISALIGNED
        except NoMemory:
            self.raise_exception(ExceptionCause.INVALID_ADDRESS, tile, self._reg("TDI_ADDRESS"), unit.tile(tile).owner)
            return TdiResult.NO_MEMORY
        except TdiRefused as refused:
            return TdiResult(refused.result)
        self._set("TDI_DATA_LO", data & 0xFFFFFFFF)
        self._set("TDI_DATA_HI", data >> 32)
        return TdiResult.OK
