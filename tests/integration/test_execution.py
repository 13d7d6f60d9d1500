# Tiles run code through a real mount: a host writes each tile's data
# through the exchange BAR, `ipufs exec` (its own process, attached to the
# IPU) loads a kernel, starts every chosen tile through the TDI and gets
# signal 46 when all have synced with the host; each tile's sum of its own
# slice comes back through DBG_DATA and tile memory. A misaligned store
# arrives as signal 44 with the right tile, context and address. A reset
# after the host (by pwrite and through its mapping) and the tiles wrote
# reads zero every way, gives the memory back, and keeps what is written
# after it.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ipufs import cli
from ipufs.client import Device
from ipufs.client.execution import debug_data
from ipufs.model.profile import Region
from tests.integration.harness import RunningDaemon, ipufs_command, running_daemon, wait_for

pytestmark = pytest.mark.mount

SUM = """\
    .text 0x40000
    .supervisor
_start:
    setzi $m2, 0x60000
    ld32 $m3, $m2, $m15, 0
    add $m3, $m3, -1
    setzi $m4, 0
    setzi $m5, 4
loop:
    ld32step $m6, $m2, $m5+=, 1
    add $m4, $m4, $m6
    brnzdec $m3, loop
    put $DBG_DATA, $m4
    st32 $m4, $m2, $m15, 100
    sync 4
done:
    bri done
"""

SYNC = """\
    .text 0x40000
    .supervisor
_start:
    get $m1, $TILE_ID
    put $DBG_DATA, $m1
    sync 4
done:
    bri done
"""

MISALIGNED = """\
    .text 0x40000
    .supervisor
_start:
    get $m1, $TILE_ID
    cmpeq $m1, $m1, 5
    brz $m1, done
    setzi $m2, 0x60002
    st32 $m1, $m2, $m15, 0
done:
    bri done
"""


@pytest.fixture
def ipu1(tmp_path: Path) -> object:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        yield d


def _elf(tmp_path: Path, source: str) -> Path:
    (tmp_path / "k.s").write_text(source)
    assert cli.main(["asm", str(tmp_path / "k.s"), "-o", str(tmp_path / "k.elf")]) == 0
    return tmp_path / "k.elf"


def _exec(board: RunningDaemon, elf: Path, tiles: str, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ipufs_command("exec", str(elf), "--dev", str(board.mountpoint), "--tiles", tiles,
                                     "--timeout", "20", "--data", *more),
                          capture_output=True, text=True, timeout=60)


STOPPED = "stopped the tiles: ipu0 reset"


def test_each_tile_sums_its_slice_and_syncs_with_the_host(ipu1: RunningDaemon, tmp_path: Path) -> None:
    tiles = range(16)
    slices = {t: [(t * 1000 + 17 * i) & 0xFFFFFFFF for i in range(10 + t)] for t in tiles}
    with Device(0, ipu1.mountpoint) as device:
        base = device.read_register("TILE_MEM_BASE")
        for t, values in slices.items():
            words = [len(values), *values]
            os.pwrite(device.ex_fd, b"".join(v.to_bytes(4, "little") for v in words),
                      device.window_start(t) + 0x60000 - base)
    done = _exec(ipu1, _elf(tmp_path, SUM), "0-15", "--read", "0x60190")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "started 16 tiles of ipu0 at 0x40000"
    assert lines[1] == "synced with the host: GS1_E0 (zone 4)"
    sums = [sum(slices[t]) & 0xFFFFFFFF for t in tiles]
    assert lines[2:-1] == [line for t in tiles for line in (f"tile {t}: DBG_DATA 0x{sums[t]:08x}",
                                                            f"tile {t}: 0x60190: 0x{sums[t]:08x}")]
    assert lines[-1] == STOPPED  # the tiles spin after their sync: exec stops them
    ipu = ipu1.daemon.devices.ipus[0]
    assert ipu1.call(lambda: sorted(ipu.execution.running)) == []


def test_whatever_wakes_for_a_client_takes_a_cpu_from_the_tiles(ipu1: RunningDaemon, tmp_path: Path) -> None:
    """The FUSE reader and the register watcher have the shortest slice,
    the threads that run tiles a long one: woken, the first preempt the
    others at once (docs/executor-speed.md)."""
    from ipufs import native
    from ipufs.model.executor.native import LANE_SLICE_S, _lib
    from tests.daemon.test_thread_slices import kept, slice_of

    if not kept():
        pytest.skip("this kernel keeps no slice per thread (Linux 6.12 and later do)")
    done = _exec(ipu1, _elf(tmp_path, SYNC), "0-15")  # tiles run: the pool of lanes exists
    assert done.returncode == 0, done.stdout + done.stderr
    named = {t.name: t.native_id for t in threading.enumerate() if t.name.startswith("ipufs-")}
    short, long = round(native.SHORTEST_SLICE_S * 1e9), round(LANE_SLICE_S * 1e9)
    assert slice_of(named["ipufs-fuse"]) == short
    assert slice_of(named["ipufs-registers"]) == short
    assert slice_of(named["ipufs-daemon"]) == long  # it runs the executor task
    python = {t.native_id for t in threading.enumerate()}
    lanes = [tid for tid in map(int, os.listdir("/proc/self/task")) if tid not in python and slice_of(tid) == long]
    assert len(lanes) == _lib.ipufs_x_pool_lanes() - 1  # the pool's threads (it keeps its first size)


def test_a_misaligned_store_arrives_as_signal_44_with_tile_and_address(ipu1: RunningDaemon, tmp_path: Path) -> None:
    done = _exec(ipu1, _elf(tmp_path, MISALIGNED), "0-7")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[1] == "exception: tile 5 context 0 address 0x60002 cause MISALIGNED"


#: `ipufs exec` in its own process, counting how often it parses an ELF.
COUNTED_EXEC = """
import sys
from ipufs import cli
from ipufs.abi import elf
parse, parses = elf.read_elf, []
elf.read_elf = lambda data, *more: parses.append(1) or parse(data, *more)
status = cli.main(sys.argv[1:])
print(f"parses {len(parses)}")
sys.exit(status)
"""


def test_exec_parses_the_file_once(ipu1: RunningDaemon, tmp_path: Path) -> None:
    """The entry it starts the tiles at and the segments it loads come from
    one parse of the file."""
    done = subprocess.run([sys.executable, "-c", COUNTED_EXEC, "exec", str(_elf(tmp_path, SYNC)), "--dev",
                           str(ipu1.mountpoint), "--tiles", "0-3", "--timeout", "20"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["started 4 tiles of ipu0 at 0x40000", "synced with the host: GS1_E0 (zone 4)",
                                        STOPPED, "parses 1"]


def test_reset_stops_every_context(ipu1: RunningDaemon, tmp_path: Path) -> None:
    with Device(0, ipu1.mountpoint) as device:
        device.load_elf(_elf(tmp_path, SUM.replace("sync 4", "bri _start")).read_bytes(), [0, 1])
        device.start(0x40000, [0, 1])
        ipu = ipu1.daemon.devices.ipus[0]
        assert ipu1.call(lambda: sorted(ipu.execution.running)) == [0, 1]
        device.reset()
        assert ipu1.call(lambda: (sorted(ipu.execution.running), ipu.execution.busy())) == ([], False)


def test_a_sync_waits_for_named_tiles_started_one_by_one_with_long_pauses(ipu1: RunningDaemon,
                                                                         tmp_path: Path) -> None:
    """The host names four tiles, then starts them one at a time, 80 ms
    apart: the tiles started first reach `sync 4` long before the last
    starts, and the sync with the host completes only after it."""
    from ipufs.abi import tile_code as code
    from ipufs.abi.registers import TdiResult
    from ipufs.client.execution import retired

    tiles = [0, 1, 2, 3]
    with Device(0, ipu1.mountpoint) as device:
        device.load_elf(_elf(tmp_path, SYNC).read_bytes(), tiles)
        for tile in tiles:
            assert device.tdi_write_register(tile, code.TDI_DBG_IOWNER, 0) == TdiResult.OK
        before, after = code.start_writes(0x40000)
        for n, tile in enumerate(tiles):
            for reg, value in before[1:]:  # stopped, given its entry
                assert device.tdi_write_register(tile, reg, value) == TdiResult.OK
            retired(device, tile, "start")
            for reg, value in after:  # and let go
                assert device.tdi_write_register(tile, reg, value) == TdiResult.OK
            if n < len(tiles) - 1:
                time.sleep(0.08)
                assert device.read_register("SYNC_GS1_COUNT") == 0, f"synced with {n + 1} of {len(tiles)} started"
        assert wait_for(lambda: device.read_register("SYNC_GS1_COUNT") == 1)
        assert [debug_data(device, t) for t in tiles] == tiles



def test_an_unmodified_c_host_runs_a_kernel_on_every_tile(ipu1: RunningDaemon, tmp_path: Path) -> None:
    """tests/c/tile_host.c, built against ipu.h alone: every tile of an ipu1
    sums its own slice of data the host wrote through the exchange BAR; the
    host starts them through the TDI, gets signal 46 when all have synced
    with it, and reads each tile's result."""
    from tests.integration.harness import ROOT, compile_c

    binary = compile_c(ROOT / "tests" / "c" / "tile_host.c", tmp_path)
    tiles = 1216
    out = subprocess.run([str(binary), str(ipu1.mountpoint), "0", str(_elf(tmp_path, SUM)), str(tiles)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "signal 46"
    want = [sum(t * 1000 + 17 * i for i in range(10 + t % 40)) & 0xFFFFFFFF for t in range(tiles)]
    assert lines[1:] == [f"tile {t} sum {want[t]} dbg {want[t]}" for t in range(tiles)]


def test_program_events_reach_the_trace(tmp_path: Path) -> None:
    import json

    trace = tmp_path / "trace.jsonl"
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(trace)) as board:
        done = _exec(board, _elf(tmp_path, MISALIGNED), "5")
        assert done.returncode == 1, done.stdout + done.stderr
        ipu = board.daemon.devices.ipus[0]
        board.call(lambda: ipu.reset())
    events = [e for e in map(json.loads, trace.read_text().splitlines()) if e["kind"] == "program"]
    assert [(e["event"], e["tile"], e["context"], e["pc"]) for e in events] == [
        ("start", 5, 0, 0x40000), ("exception", 5, 0, 0x40010)]
    assert "4-byte store at 0x60002" in events[1]["detail"]


def test_exec_reports_a_timeout_and_a_bad_file(ipu1: RunningDaemon, tmp_path: Path) -> None:
    spin = _elf(tmp_path, SUM.replace("sync 4", "bri _start"))
    done = subprocess.run(ipufs_command("exec", str(spin), "--dev", str(ipu1.mountpoint), "--tiles", "3",
                                        "--timeout", "0.5"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "timeout after 0.5 s" in done.stdout, done.stdout + done.stderr
    (tmp_path / "junk.elf").write_bytes(b"junk" * 20)
    bad = subprocess.run(ipufs_command("exec", str(tmp_path / "junk.elf"), "--dev", str(ipu1.mountpoint)),
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.startswith("ipufs exec: ") and len(bad.stderr.splitlines()) == 1
    ipu = ipu1.daemon.devices.ipus[0]
    ipu1.call(lambda: ipu.reset())


SPIN = SUM.replace("sync 4", "bri _start")


def _running(board: RunningDaemon) -> list[int]:
    ipu = board.daemon.devices.ipus[0]
    return board.call(lambda: sorted(ipu.execution.running))


def test_a_timeout_stops_the_tiles_and_the_next_exec_runs(ipu1: RunningDaemon, tmp_path: Path) -> None:
    """A timeout once left the tiles running with nobody attached, and the
    next exec was refused (the supervisors were not quiescent)."""
    spin = _elf(tmp_path, SPIN)
    done = subprocess.run(ipufs_command("exec", str(spin), "--dev", str(ipu1.mountpoint), "--tiles", "0-3",
                                        "--timeout", "0.5"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.splitlines()[1:] == ["timeout after 0.5 s: tiles still running", STOPPED]
    assert _running(ipu1) == []
    again = _exec(ipu1, _elf(tmp_path, SYNC), "0-3")
    assert again.returncode == 0 and again.stdout.splitlines()[1] == "synced with the host: GS1_E0 (zone 4)", \
        again.stdout + again.stderr


def _started(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("started "), line + (proc.stderr.read() if proc.stderr else "")


@pytest.mark.parametrize("signo,status,said", [(signal.SIGINT, 130, ""),
                                               (signal.SIGTERM, 143, "ipufs exec: stopped by SIGTERM\n")])
def test_an_interrupt_or_sigterm_stops_the_tiles(ipu1: RunningDaemon, tmp_path: Path, signo: int, status: int,
                                                said: str) -> None:
    spin = _elf(tmp_path, SPIN)
    proc = subprocess.Popen(ipufs_command("exec", str(spin), "--dev", str(ipu1.mountpoint), "--tiles", "0-7",
                                          "--timeout", "120"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _started(proc)
        assert wait_for(lambda: _running(ipu1) == list(range(8)))
        proc.send_signal(signo)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, err) == (status, said)
    assert out.splitlines() == [STOPPED]
    assert _running(ipu1) == []


def test_an_error_after_the_start_stops_the_tiles(ipu1: RunningDaemon, tmp_path: Path) -> None:
    # --read of an address outside tile memory fails after the tiles synced.
    done = _exec(ipu1, _elf(tmp_path, SYNC), "0-3", "--read", "0x10")
    assert done.returncode == 1 and done.stdout.splitlines()[-1] == STOPPED, done.stdout + done.stderr
    assert done.stderr == ("ipufs exec: 4 bytes at 0x10 do not lie in populated tile memory 0x40000-0x80000\n")
    assert _running(ipu1) == []


def test_keep_leaves_the_tiles_running(ipu1: RunningDaemon, tmp_path: Path) -> None:
    done = _exec(ipu1, _elf(tmp_path, SPIN), "3", "--keep", "--timeout", "0.5")
    assert done.returncode == 2 and STOPPED not in done.stdout
    assert _running(ipu1) == [3]
    ipu = ipu1.daemon.devices.ipus[0]
    ipu1.call(lambda: ipu.reset())


#: The shipped example: its input at the symbol `input`, no fixed address.
SUM_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sum.s"


def test_write_puts_the_input_at_a_symbol_on_every_tile(ipu1: RunningDaemon, tmp_path: Path) -> None:
    (tmp_path / "values.bin").write_bytes(b"".join(v.to_bytes(4, "little") for v in (3, 100, 20, 3)))
    elf = _elf(tmp_path, SUM_EXAMPLE.read_text())
    done = _exec(ipu1, elf, "0-2", "--write", "input=4,1,2,3,4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[2:5] == [f"tile {t}: DBG_DATA 0x0000000a" for t in range(3)]
    done = _exec(ipu1, elf, "5", "--write", f"input=@{tmp_path / 'values.bin'}", "--read", "input+4:2")
    assert done.stdout.splitlines()[2:4] == ["tile 5: DBG_DATA 0x0000007b", "tile 5: input+4: 0x00000064 0x00000014"], \
        done.stdout + done.stderr
    bad = _exec(ipu1, elf, "0", "--write", "nowhere=1")
    assert (bad.returncode, bad.stderr) == (1, "ipufs exec: nowhere: the file has no symbol nowhere\n")


def test_code_for_another_architecture_says_how_to_assemble_it(ipu1: RunningDaemon, tmp_path: Path) -> None:
    (tmp_path / "k.s").write_text(SYNC.replace(".text 0x40000", ".text"))
    assert cli.main(["asm", str(tmp_path / "k.s"), "--arch", "ipu2", "-o", str(tmp_path / "k.elf")]) == 0
    done = _exec(ipu1, tmp_path / "k.elf", "0")
    assert done.returncode == 1 and done.stderr == (
        "ipufs exec: the file is ipu2 code and this IPU is ipu1: assemble it for ipu1 (`ipufs asm --arch ipu1`, or "
        "`--dev DIR` to take the IPU's)\n")
    assert cli.main(["asm", str(tmp_path / "k.s"), "--dev", str(ipu1.mountpoint), "-o", str(tmp_path / "k.elf")]) == 0
    assert _exec(ipu1, tmp_path / "k.elf", "0").returncode == 0



_READ_MAPPED = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
view = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
at = int(sys.argv[2])
print(int.from_bytes(view[at:at + 4], "little"))
"""


def test_tile_stores_reach_a_mapping_in_page_cache_mode(tmp_path: Path) -> None:
    """Without passthrough, clients map copies: what tiles store is
    published to them as other model writes are. (The mapping is read in
    a subprocess: a page fault served by this process's daemon thread must
    not wait on this thread's GIL.)"""
    import sys

    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", passthrough=False) as board:
        with Device(0, board.mountpoint) as device:
            base = device.read_register("TILE_MEM_BASE")
            window = device.window_start(2)
            os.pwrite(device.ex_fd, b"".join(v.to_bytes(4, "little") for v in (3, 5, 6, 7)),
                      window + 0x60000 - base)
        at = str(window + 0x60000 + 400 - base)

        def mapped() -> int:
            return int(subprocess.run([sys.executable, "-c", _READ_MAPPED, board.path("ipu0_ex"), at],
                                      capture_output=True, text=True, timeout=30, check=True).stdout)

        assert mapped() == 0
        done = _exec(board, _elf(tmp_path, SUM), "2", "--keep")
        assert done.returncode == 0, done.stdout + done.stderr
        assert mapped() == 5 + 6 + 7
        ipu = board.daemon.devices.ipus[0]
        board.call(lambda: ipu.reset())


LOAD = """\
    .text 0x40000
    .supervisor
_start:
    setzi $m2, 0x60000
    ld32 $m3, $m2, $m15, 0
    put $DBG_DATA, $m3
    sync 4
done:
    bri done
"""


@pytest.mark.parametrize("count", [3, 40])  # runs of written pages: a few, and more than DISCARD_RUNS
def test_a_reset_reads_zero_every_way_frees_the_memory_and_keeps_later_writes(
        ipu1: RunningDaemon, tmp_path: Path, count: int) -> None:
    tiles = range(0, 4 * count, 4)
    backing = ipu1.daemon.devices.backing[0, Region.EXCHANGE]
    ipu = ipu1.daemon.devices.ipus[0]
    elf = _elf(tmp_path, LOAD)
    with Device(0, ipu1.mountpoint) as device:
        base = device.read_register("TILE_MEM_BASE")
        data = {t: device.window_start(t) + 0x60000 - base for t in tiles}  # what LOAD loads
        mapped = {t: device.window_start(t) + 0x70000 - base for t in tiles}
        for t in tiles:
            os.pwrite(device.ex_fd, (0x1000 + t).to_bytes(4, "little"), data[t])
            device.exchange[mapped[t] : mapped[t] + 4] = b"mapd"
        done = _exec(ipu1, elf, ",".join(map(str, tiles)), "--keep")
        assert done.stdout.splitlines()[2:] == [f"tile {t}: DBG_DATA 0x{0x1000 + t:08x}" for t in tiles], done.stderr
        assert ipu1.call(backing.blocks) > 0
        device.reset()
        assert ipu1.call(backing.blocks) == 0  # first: reading through a mapping allocates
        for t in tiles:
            assert os.pread(device.ex_fd, 4, data[t]) == bytes(4)
            assert device.exchange[mapped[t] : mapped[t] + 4] == bytes(4)
            assert ipu1.call(lambda: ipu.tiles.read(t, 0x70000, 4)) == bytes(4)
        done = _exec(ipu1, elf, ",".join(map(str, tiles)), "--keep")
        assert done.stdout.splitlines()[2:] == [f"tile {t}: DBG_DATA 0x00000000" for t in tiles], done.stderr
        # Written right after a reset: kept, through pread and the mapping,
        # while the daemon frees what the reset set aside.
        device.reset()
        for t in tiles:
            os.pwrite(device.ex_fd, b"late", data[t])
            device.exchange[mapped[t] : mapped[t] + 4] = b"LATE"
        time.sleep(0.3)
        assert all(os.pread(device.ex_fd, 4, data[t]) == b"late" for t in tiles)
        assert all(device.exchange[mapped[t] : mapped[t] + 4] == b"LATE" for t in tiles)
