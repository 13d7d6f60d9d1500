# `ipufs exec`: load an elf32-colossus file onto tiles, start them at its
# entry through the tile debug interface, and wait for what they do: an
# exception (signal 44), a sync with the host (signals 46..49), every
# context stopped, or a timeout; then print it (docs/execution.md). With
# --break, each supervisor gets an instruction breakpoint first.
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ipufs.abi import elf
from ipufs.abi import tile_code as code
from ipufs.abi.interrupts import FIRST_SIGNAL, Interrupt
from ipufs.abi.registers import ExceptionCause

EXIT_DONE, EXIT_EXCEPTION, EXIT_TIMEOUT = 0, 1, 2
_POLL_S = 0.25


def _cause(value: int) -> str:
    try:
        return ExceptionCause(value).name
    except ValueError:
        return str(value)


def _address(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value % 4 or not 0 <= value < 1 << 21:
        raise argparse.ArgumentTypeError(f"{text}: not a 4-byte aligned tile address")
    return value


def cmd_exec(args: argparse.Namespace) -> int:
    from ipufs.client import Device
    from ipufs.client.execution import context_status, debug_data, write_csr
    from ipufs.client.loader import parse_tiles
    from ipufs.client.signals import SignalReceiver
    from ipufs.tools import devices

    data = Path(args.file).read_bytes()
    try:
        image = elf.read_elf(data)
    except elf.ElfError as exc:
        raise elf.ElfError(f"{args.file}: {exc}") from None
    root = devices.root(args.dev)
    with SignalReceiver() as signals, Device(args.ipu, root) as device:
        device.attach()
        device.set_ipu_id(args.ipu)
        count = device.read_register("TILE_COUNT")
        tiles = parse_tiles(args.tiles, count) if args.tiles else list(range(count))
        device.load_elf(image, tiles)  # parsed once, above: its entry is needed too
        if args.brk is not None:  # IBRK on each supervisor (ENS), through injections: $m14 is overwritten
            for tile in tiles:
                write_csr(device, tile, code.CSR_DBG_IBRK0_PC, args.brk)
                write_csr(device, tile, code.CSR_DBG_IBRK0_CTL, code.IBRK_ENS)
        device.start(image.entry, tiles)
        print(f"started {len(tiles)} tile{'s' if len(tiles) != 1 else ''} of ipu{args.ipu} at 0x{image.entry:x}")
        deadline = time.monotonic() + args.timeout
        status = EXIT_TIMEOUT
        while time.monotonic() < deadline:
            got = signals.receive(timeout=min(_POLL_S, max(0.0, deadline - time.monotonic())))
            sources = [Interrupt(s.signo - FIRST_SIGNAL) for s in got]
            if Interrupt.EXCEPTION in sources:
                print(f"exception: tile {device.read_register('EXC_TILE')} context "
                      f"{device.read_register('EXC_CONTEXT')} address 0x{device.read_register('EXC_ADDRESS'):x} "
                      f"cause {_cause(device.read_register('EXC_CAUSE'))}")
                status = EXIT_EXCEPTION
                break
            synced = [s for s in sources if s is not Interrupt.ICU_DOORBELL]
            if synced:
                print(f"synced with the host: {synced[0].name} "
                      f"(zone {device.read_register('SYNC_STATUS') >> 8 & 0xFF})")
                status = EXIT_DONE
                break
            if all(all(s == code.CONTEXT_INACTIVE for s in context_status(device, t)) for t in tiles):
                print("finished: every context inactive")
                status = EXIT_DONE
                break
        else:
            print(f"timeout after {args.timeout:g} s: tiles still running")
        if args.data:
            for tile in tiles:
                print(f"tile {tile}: DBG_DATA 0x{debug_data(device, tile):08x}")
    return status


def add_commands(sub: Any, tool: Any) -> None:
    """Add `exec` to the subcommands ``sub`` (``tool`` as for cli_isa)."""
    ex = tool("exec", "load an elf32-colossus file onto tiles, start them and wait for what they do")
    ex.description = ("Load FILE.elf onto the tiles, start each tile's supervisor at the entry through the tile "
                      "debug interface and wait: exit status 0 when the tiles sync with the host (signals "
                      "46-49) or every context stops, 1 on a tile exception (signal 44, printed with its "
                      "tile, context, address and cause) or an error, 2 on a timeout.")
    ex.add_argument("file", metavar="FILE.elf")
    ex.add_argument("--ipu", type=int, default=0, help="the IPU (default 0)")
    ex.add_argument("--tiles", help="which tiles: 0-1215, 3 or 0,2,5-9 (default every tile)")
    ex.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (default 10)")
    ex.add_argument("--data", action="store_true", help="then print each tile's DBG_DATA")
    ex.add_argument("--break", dest="brk", type=_address, metavar="ADDRESS",
                    help="an instruction breakpoint for each supervisor at ADDRESS: the tile stops there "
                         "(printed as an exception, cause BREAKPOINT)")
    ex.set_defaults(func=cmd_exec)
