# `ipufs exec`: load an elf32-colossus file onto tiles, write their input
# (--write), start them at its entry through the tile debug interface, and
# wait for what they do: an exception (signal 44), a sync with the host
# (signals 46..49), every context stopped, or a timeout; then print it and
# what --data and --read ask (docs/execution.md). It leaves nothing
# running: on every way out after the start (the tiles synced, faulted,
# timed out; Ctrl-C, SIGTERM, an error) it resets the IPU, which stops
# every tile, unless the tiles stopped by themselves, a --break
# breakpoint stopped them for a debugger, or --keep says to leave them.
from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ipufs.abi import elf
from ipufs.abi import tile_code as code
from ipufs.abi.interrupts import FIRST_SIGNAL, Interrupt
from ipufs.abi.registers import ExceptionCause
from ipufs.problems import Problem

EXIT_DONE, EXIT_EXCEPTION, EXIT_TIMEOUT = 0, 1, 2
_POLL_S = 0.25
#: How the wait ended, and whether the tiles are left as they are then.
FINISHED, SYNCED, EXCEPTION, BREAKPOINT, TIMEOUT = "finished", "synced", "exception", "breakpoint", "timeout"
_LEFT_AS_THEY_ARE = {FINISHED, BREAKPOINT}


class Terminated(Problem):
    """SIGTERM or SIGHUP came while the tiles ran (they were stopped)."""


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


def _where(text: str, image: elf.ElfImage) -> int:
    """A tile address: a number, or a symbol of the file (plus or minus a
    number: `input+8`)."""
    from ipufs.model.isa.expressions import ExpressionProblem, evaluate, parse

    symbols = {s.name: s.value for s in image.symbols}
    try:
        return evaluate(parse(text), symbols.__getitem__)
    except KeyError as exc:
        raise ValueError(f"{text}: the file has no symbol {exc.args[0]}") from None
    except ExpressionProblem as exc:
        raise ValueError(f"{text}: {exc}") from None


def _writes(given: list[str] | None, image: elf.ElfImage) -> list[tuple[int, bytes]]:
    """--write ADDRESS=WORD,WORD,... or ADDRESS=@FILE: (address, bytes)."""
    from ipufs.model.isa.assembler import TILE_MEMORY_END
    from ipufs.tools.inputs import read_input

    out = []
    for text in given or ():
        where, equals, what = text.partition("=")
        if not equals or not what:
            raise ValueError(f"--write {text}: write ADDRESS=WORD,WORD,... or ADDRESS=@FILE")
        address = _where(where, image)
        if what.startswith("@"):
            data = read_input(what[1:], TILE_MEMORY_END)
        else:
            try:
                words = [int(w, 0) for w in what.split(",")]
            except ValueError:
                raise ValueError(f"--write {text}: the words are numbers (decimal, or 0x hex)") from None
            if any(not -(1 << 31) <= w < 1 << 32 for w in words):
                raise ValueError(f"--write {text}: a word is 32 bits")
            data = b"".join((w & 0xFFFFFFFF).to_bytes(4, "little") for w in words)
        out.append((address, data))
    return out


def _reads(given: list[str] | None, image: elf.ElfImage) -> list[tuple[str, int, int]]:
    """--read ADDRESS[:COUNT]: (as written, address, words)."""
    out = []
    for text in given or ():
        where, colon, count = text.partition(":")
        try:
            words = int(count, 0) if colon else 1
        except ValueError:
            raise ValueError(f"--read {text}: write ADDRESS or ADDRESS:WORDS") from None
        if not 0 < words <= 1 << 16:
            raise ValueError(f"--read {text}: from 1 to 65536 words")
        out.append((where, _where(where, image), words))
    return out


@contextmanager
def _terminations() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated (once), so that the way out
    that stops the tiles runs; their old handlers come back after."""
    fired: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if not fired:
            fired.append(signum)
            raise Terminated(f"stopped by {signal.Signals(signum).name}", status=128 + signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def cmd_exec(args: argparse.Namespace) -> int:
    from ipufs.cli_isa import read_image
    from ipufs.client import Device
    from ipufs.client.loader import parse_tiles, write_memory
    from ipufs.client.signals import SignalReceiver
    from ipufs.tools import devices

    image = read_image(Path(args.file))
    writes, reads = _writes(args.write, image), _reads(args.read, image)
    root = devices.root(args.dev)
    with _terminations(), SignalReceiver(restore_mask=False) as signals, Device(args.ipu, root) as device:
        device.attach()
        device.set_ipu_id(args.ipu)
        count = device.read_register("TILE_COUNT")
        tiles = parse_tiles(args.tiles, count) if args.tiles else list(range(count))
        device.load_elf(image, tiles)  # parsed once, above: its entry and symbols are needed too
        for address, data in writes:
            write_memory(device, tiles, address, data)
        if args.brk is not None:
            _set_breakpoints(device, tiles, args.brk)
        outcome = ""
        try:
            device.start(image.entry, tiles)
            print(f"started {len(tiles)} tile{'s' if len(tiles) != 1 else ''} of ipu{args.ipu} at 0x{image.entry:x}")
            outcome = _wait(device, signals, tiles, args.timeout)
            _report(device, tiles, args.data, reads)
        finally:
            if outcome not in _LEFT_AS_THEY_ARE and not args.keep:
                device.reset()
                print(f"stopped the tiles: ipu{args.ipu} reset", flush=True)
    return {FINISHED: EXIT_DONE, SYNCED: EXIT_DONE, TIMEOUT: EXIT_TIMEOUT}.get(outcome, EXIT_EXCEPTION)


def _set_breakpoints(device: Any, tiles: list[int], address: int) -> None:
    """An IBRK on each supervisor (ENS), through injections: $m14 is overwritten."""
    from ipufs.client.execution import write_csr

    for tile in tiles:
        write_csr(device, tile, code.CSR_DBG_IBRK0_PC, address)
        write_csr(device, tile, code.CSR_DBG_IBRK0_CTL, code.IBRK_ENS)


def _wait(device: Any, signals: Any, tiles: list[int], timeout: float) -> str:
    """Wait for the tiles; print how it ended and say which way."""
    from ipufs.client.execution import context_status

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = signals.receive(timeout=min(_POLL_S, max(0.0, deadline - time.monotonic())))
        sources = [Interrupt(s.signo - FIRST_SIGNAL) for s in got]
        if Interrupt.EXCEPTION in sources:
            cause = _cause(device.read_register("EXC_CAUSE"))
            print(f"exception: tile {device.read_register('EXC_TILE')} context "
                  f"{device.read_register('EXC_CONTEXT')} address 0x{device.read_register('EXC_ADDRESS'):x} "
                  f"cause {cause}")
            return BREAKPOINT if cause == ExceptionCause.BREAKPOINT.name else EXCEPTION
        synced = [s for s in sources if s is not Interrupt.ICU_DOORBELL]
        if synced:
            print(f"synced with the host: {synced[0].name} (zone {device.read_register('SYNC_STATUS') >> 8 & 0xFF})")
            return SYNCED
        if all(all(s == code.CONTEXT_INACTIVE for s in context_status(device, t)) for t in tiles):
            print("finished: every context inactive")
            return FINISHED
    print(f"timeout after {timeout:g} s: tiles still running")
    return TIMEOUT


def _report(device: Any, tiles: list[int], data: bool, reads: list[tuple[str, int, int]]) -> None:
    from ipufs.client.execution import debug_data
    from ipufs.client.loader import read_memory

    for tile in tiles:
        if data:
            print(f"tile {tile}: DBG_DATA 0x{debug_data(device, tile):08x}")
        for text, address, words in reads:
            raw = read_memory(device, tile, address, 4 * words)
            values = " ".join(f"0x{int.from_bytes(raw[i:i + 4], 'little'):08x}" for i in range(0, len(raw), 4))
            print(f"tile {tile}: {text}: {values}")
    sys.stdout.flush()


def add_commands(sub: Any, tool: Any) -> None:
    """Add `exec` to the subcommands ``sub`` (``tool`` as for cli_isa)."""
    ex = tool("exec", "load an elf32-colossus file onto tiles, start them and wait for what they do")
    ex.description = ("Load FILE.elf onto the tiles, write their input, start each tile's supervisor at the entry "
                      "through the tile debug interface and wait: exit status 0 when the tiles sync with the host "
                      "(signals 46-49) or every context stops, 1 on a tile exception (signal 44, printed with its "
                      "tile, context, address and cause) or an error, 2 on a timeout. Then it resets the IPU, "
                      "stopping every tile, unless they stopped by themselves or at a --break breakpoint, or "
                      "--keep is given.")
    ex.add_argument("file", metavar="FILE.elf")
    ex.add_argument("--ipu", type=int, default=0, help="the IPU (default 0)")
    ex.add_argument("--tiles", help="which tiles: 0-1215, 3 or 0,2,5-9 (default every tile)")
    ex.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (default 10)")
    ex.add_argument("--write", action="append", metavar="ADDRESS=WORDS",
                    help="before the start, write 32-bit WORDS (0x1,2,...) or a file's bytes (@FILE) at ADDRESS "
                         "(a number, or a symbol of the file: input, input+8) of every tile (repeatable)")
    ex.add_argument("--data", action="store_true", help="then print each tile's DBG_DATA")
    ex.add_argument("--read", action="append", metavar="ADDRESS[:WORDS]",
                    help="then print WORDS (default 1) 32-bit words at ADDRESS of each tile (repeatable)")
    ex.add_argument("--break", dest="brk", type=_address, metavar="ADDRESS",
                    help="an instruction breakpoint for each supervisor at ADDRESS: the tile stops there "
                         "(printed as an exception, cause BREAKPOINT) and is left stopped for a debugger")
    ex.add_argument("--keep", action="store_true", help="leave the tiles as they are on the way out (no reset)")
    ex.set_defaults(func=cmd_exec)
