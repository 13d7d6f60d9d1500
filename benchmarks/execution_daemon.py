"""The daemon stays responsive while tiles run (docs/executor-speed.md).

    .venv/bin/python benchmarks/execution_daemon.py          # prints the rows
    .venv/bin/python benchmarks/execution_daemon.py --smoke  # seconds
    .venv/bin/python benchmarks/execution_daemon.py --reset-in-process  # the last row alone, no mount

A real `ipufs mount` of 4 ipu2 IPUs (benchmarks/run.py's daemon(), pinned
to one CPU); a Python client times SET_IPU_ID ioctl round trips while the
mount is idle, then loads a spin loop onto every tile of every IPU (5,888
tiles), starts them through the TDI and times the same ioctls while they
run; then the RESET ioctl of each IPU while the others still run (the
ioctl returns once the model has stopped every context of that IPU and
cleared its tile memory). Then the same round trips with a mount of one
ipu2 on every CPU, as a user runs it, whose tiles take every CPU. A last row splits a reset in process (no mount: the model over
the daemon's memfd backing) after every tile of an ipu2 ran the same loop
and left the same two pages written: stopping the contexts against
clearing the memory, and a reset right after, with nothing written since.
benchmarks/run.py adds these rows to docs/performance.md.
"""
from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

SPIN = """
.text
.supervisor
_start:
  setzi $m3, 0x4c000
loop:
  add $m1, $m1, 1
  st32 $m1, $m3, $m15, 1024
  bri loop
"""
COUNTER = 0x1000  # where each tile's loop counter lies, from the start of its window (ipu2: memory at 0x4c000)


def _round_trips(device: object, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        device.set_ipu_id(0)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
    return times


def _reset_in_process(smoke: bool) -> tuple[int, float, float, float]:
    """Pages written, then the median seconds of Execution.reset, of the
    whole Ipu.reset, over rounds in which every tile ran the spin loop
    (loaded as the host loads it, through the backing file, not the model),
    and of an Ipu.reset right after (nothing written since; the page
    tables the run left in the daemon's mapping are still there)."""
    from execution import start_tiles  # benchmarks/execution.py
    from ipufs.driver.devices import DeviceSet
    from ipufs.model.isa import Arch
    from ipufs.model.isa.assembler import Assembler
    from ipufs.model.profile import PROFILES, Region

    devices = DeviceSet(PROFILES["ipu2"], 1)
    try:
        ipu = devices.ipus[0]
        backing = devices.backing[0, Region.EXCHANGE]
        program = Assembler(Arch.IPU2).assemble(SPIN)
        tiles = 64 if smoke else ipu.profile.tiles
        window = ipu.profile.tile_window
        stops, resets, idles = [], [], []
        for _ in range(3 if smoke else 7):
            for tile in range(tiles):
                for section in program.sections:
                    if section.data and section.address is not None:
                        os.pwrite(backing.fd, bytes(section.data), tile * window + section.address - ipu.tiles.base)
            start_tiles(ipu, range(tiles), program.entry)
            ipu.execution.run(tiles * 16)  # every tile round its loop at least once
            pages = backing.blocks() // 8
            start = time.perf_counter()
            ipu.execution.reset()
            stops.append(time.perf_counter() - start)
            ipu.execution.sweep(1 << 30)
            start_tiles(ipu, range(tiles), program.entry)
            ipu.execution.run(tiles * 16)
            start = time.perf_counter()
            ipu.reset()
            resets.append(time.perf_counter() - start)
            ipu.execution.sweep(1 << 30)
            start = time.perf_counter()
            ipu.reset()
            idles.append(time.perf_counter() - start)
            ipu.execution.sweep(1 << 30)
        return pages, statistics.median(stops), statistics.median(resets), statistics.median(idles)
    finally:
        devices.close()


def _while_running(mnt: Path, ipus: int, image: bytes, n: int, smoke: bool, *,
                   resets: bool) -> tuple[list[float], list[float], int, list[float], list[float]]:
    """SET_IPU_ID round trips on an idle mount, then while every tile of
    ``ipus`` IPUs runs ``image``; with ``resets``, then the RESET of each
    IPU while the others still run, and of each idle one."""
    from ipufs.client import Device

    devices = [Device(i, mnt) for i in range(ipus)]
    busy_resets: list[float] = []
    idle_resets: list[float] = []
    try:
        for d in devices:
            d.attach()
        idle = _round_trips(devices[0], n)
        tiles = devices[0].read_register("TILE_COUNT") if not smoke else 64
        for d in devices:
            d.load_elf(image, range(tiles))
            d.start(d.read_register("TILE_MEM_BASE"), range(tiles))
        time.sleep(0.5)
        busy = _round_trips(devices[0], n)
        counters = [int.from_bytes(os.pread(d.ex_fd, 4, d.window_start(tiles - 1) + COUNTER), "little")
                    for d in devices]
        if not all(counters):
            raise RuntimeError(f"the tiles did not run: last tiles' counters {counters}")
        for d in reversed(devices) if resets else ():
            start = time.perf_counter()
            d.reset()
            busy_resets.append(time.perf_counter() - start)
        for d in devices if resets else ():
            start = time.perf_counter()
            d.reset()
            idle_resets.append(time.perf_counter() - start)
    finally:
        for d in devices:
            d.close()
    return idle, busy, tiles, busy_resets, idle_resets


def rows(smoke: bool) -> list[tuple[str, str, str, str, str]]:
    from run import daemon, p50, p99  # benchmarks/run.py

    ipus = 4
    n = 200 if smoke else 2000
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "spin.s"
        source.write_text(SPIN)
        subprocess.run([sys.executable, "-I", "-m", "ipufs", "asm", str(source), "--arch", "ipu2",
                        "-o", str(Path(tmp) / "spin.elf")], check=True)
        image = (Path(tmp) / "spin.elf").read_bytes()
        signal.pthread_sigmask(signal.SIG_BLOCK, range(44, 50))  # attached: no signal may end us
        with daemon(ipus) as (mnt, _pid, _):
            idle, busy, tiles, resets, idle_resets = _while_running(mnt, ipus, image, n, smoke, resets=True)
        with daemon(1, cpu=None) as (mnt, _pid, _):  # as a user runs it: every CPU
            spread_idle, spread_busy, _, _, _ = _while_running(mnt, 1, image, n, smoke, resets=False)
    what = f"every tile of {ipus} × ipu2 ({ipus * tiles:,} tiles)"
    cpus = len(os.sched_getaffinity(0))
    pages, stop, reset, idle_reset = _reset_in_process(smoke)

    def trips(busy: list[float], idle: list[float]) -> tuple[str, str, str, str]:
        return (f"{p50(busy) * 1e6:.1f} µs / {p99(busy) * 1e6:.1f} µs",
                f"idle mount: {p50(idle) * 1e6:.1f} µs / {p99(idle) * 1e6:.1f} µs",
                f"{statistics.median(busy) / statistics.median(idle):.2f}×", "≤ 2× idle")

    return [
        (f"Executor: SET_IPU_ID round trip (Python client), p50 / p99, while {what} runs a loop, the daemon on "
         "one CPU", *trips(busy, idle)),
        (f"Executor: SET_IPU_ID round trip (Python client), p50 / p99, while every tile of an ipu2 runs the loop, "
         f"the daemon on every CPU ({cpus}: the tiles take them all)", *trips(spread_busy, spread_idle)),
        (f"Executor: RESET ioctl of one IPU while {what} runs, worst of {ipus}",
         f"{max(resets) * 1e3:.1f} ms", f"RESET of an idle IPU, worst of {ipus}: {max(idle_resets) * 1e3:.1f} ms",
         "—", "≤ 10 ms"),
        (f"Executor: a reset of an ipu2 in process after every tile ran the loop ({pages:,} pages written), median",
         f"{reset * 1e3:.1f} ms",
         f"of which stopping every context: {stop * 1e6:.0f} µs; the same IPU's reset right after: "
         f"{idle_reset * 1e6:.0f} µs", "—", "—"),
    ]


def reset_in_process_only() -> int:
    """The last row's measurement alone, with no mount (to run under
    `perf record`): its figures in milliseconds."""
    pages, stop, reset, idle_reset = _reset_in_process(smoke=False)
    print(f"{pages:,} pages written; reset {reset * 1e3:.2f} ms, of which stopping {stop * 1e3:.2f} ms; "
          f"the reset right after {idle_reset * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--reset-in-process"]:
        sys.exit(reset_in_process_only())
    from rows_main import print_rows  # beside this script

    sys.exit(print_rows(__doc__, rows))
