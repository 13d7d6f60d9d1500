# A debugger's round trip through a real mount: a host process (its own,
# attached to the IPU) loads a program, sets an instruction breakpoint
# through the TDI (CSR writes carried by injected `get`/`put`), starts the
# program, receives signal 44 with cause BREAKPOINT at the breakpoint's
# address, reads the stopped context's ETYPE, $DBG_BRK_ID and a register
# through DBG_DATA, resumes it with an injected branch, and the program
# runs to its sync with the host (signal 46) with the right result. And
# `ipufs exec --break`, which does the same setting for every tile, and a
# C debugger using ipu.h alone.
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ipufs import cli
from tests.integration.harness import RunningDaemon, ipufs_command, running_daemon

pytestmark = pytest.mark.mount

#: sums 1..10; `here` follows the loop
PROGRAM = """\
    .text 0x40000
    .supervisor
_start:
    setzi $m3, 9
    setzi $m4, 0
    setzi $m5, 0
loop:
    add $m5, $m5, 1
    add $m4, $m4, $m5
    brnzdec $m3, loop
here:
    put $DBG_DATA, $m4
    sync 4
done:
    bri done
"""
HERE = 0x40000 + 4 * 6

DEBUGGER = """
import json, sys
from ipufs.abi import tile_code as code
from ipufs.client import Device, SignalReceiver
from ipufs.client.execution import context_status, debug_data, read_csr, read_m, resume, write_csr

mount, elf, here = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}
with SignalReceiver() as signals, Device(0, mount) as dev:
    dev.attach()
    dev.load_elf(open(elf, "rb").read(), [0])
    write_csr(dev, 0, code.CSR_DBG_IBRK0_PC, here)
    write_csr(dev, 0, code.CSR_DBG_IBRK0_CTL, 1)  # ENS: the supervisor
    dev.start(0x40000, [0])
    out["stop"] = [s.signo for s in signals.wait_for(1, 10.0)]
    out["exc"] = [dev.read_register(n) for n in ("EXC_CAUSE", "EXC_TILE", "EXC_ADDRESS", "EXC_CONTEXT")]
    out["status"] = context_status(dev, 0)[0]
    out["m4"] = read_m(dev, 0, 4)
    out["etype"] = (read_csr(dev, 0, code.CSR_SSR) >> 4) & 0xF
    out["brk_id"] = read_csr(dev, 0, code.CSR_DBG_BRK_ID)
    out["pc"] = read_csr(dev, 0, 0x00)  # $PC: where the context stopped
    out["before"] = debug_data(dev, 0)
    dev.write_register("CMD_EXC_CLEAR", 1)
    resume(dev, 0)  # where it stopped
    out["go"] = [s.signo for s in signals.wait_for(1, 10.0)]
    out["status_after"] = context_status(dev, 0)[0]
    out["after"] = debug_data(dev, 0)
    out["exc_after"] = dev.read_register("EXC_STATUS")
print(json.dumps(out))
"""


@pytest.fixture
def ipu1(tmp_path: Path) -> object:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        yield d


def test_an_instruction_breakpoint_set_through_the_tdi_stops_and_resumes(ipu1: RunningDaemon,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "p.s").write_text(PROGRAM)
    assert cli.main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.elf")]) == 0
    done = subprocess.run([sys.executable, "-c", DEBUGGER, str(ipu1.mountpoint), str(tmp_path / "p.elf"), str(HERE)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["stop"] == [44]
    assert out["exc"] == [9, 0, HERE, 0]  # BREAKPOINT, tile 0, the breakpoint's address, the supervisor
    assert out["status"] == 2  # EXCEPTED_DBG
    assert (out["etype"], out["brk_id"], out["pc"]) == (15, 0, HERE)  # IBRK, channel 0, before `here`
    assert out["m4"] == 55  # the loop ran
    assert out["before"] == HERE  # `here` had not run: DBG_DATA holds the host's last read ($PC)
    assert out["go"] == [46]  # resumed: past the breakpoint to `sync 4`, GS1 with the host
    assert out["status_after"] == 1 and out["after"] == 55 and out["exc_after"] == 0


def test_exec_with_a_breakpoint_stops_every_tile_there(ipu1: RunningDaemon, tmp_path: Path) -> None:
    (tmp_path / "p.s").write_text(PROGRAM)
    assert cli.main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.elf")]) == 0
    run = [*ipufs_command("exec", str(tmp_path / "p.elf"), "--dev", str(ipu1.mountpoint), "--tiles", "0-3",
                          "--timeout", "20")]
    done = subprocess.run([*run, "--break", hex(HERE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[1] == f"exception: tile 0 context 0 address 0x{HERE:x} cause BREAKPOINT"
    ipu = ipu1.daemon.devices.ipus[0]
    stopped = ipu1.call(lambda: [(s.supervisor.status.name, s.supervisor.pc) for s in
                                 (ipu.execution.states[t] for t in range(4))])
    assert stopped == [("EXCEPTED", HERE)] * 4
    bad = subprocess.run([*run, "--break", "0x40002"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a 4-byte aligned tile address" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_an_unmodified_c_debugger_stops_inspects_and_resumes(ipu1: RunningDaemon, tmp_path: Path) -> None:
    """tests/c/tile_debugger.c, built against ipu.h alone: the same round
    trip with ipufs_write_csr, ipufs_read_csr, ipufs_read_m, ipufs_resume."""
    from tests.integration.harness import ROOT, compile_c

    (tmp_path / "p.s").write_text(PROGRAM)
    assert cli.main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.elf")]) == 0
    binary = compile_c(ROOT / "tests" / "c" / "tile_debugger.c", tmp_path)
    out = subprocess.run([str(binary), str(ipu1.mountpoint), "0", str(tmp_path / "p.elf"), hex(HERE)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["signal 44", f"cause 9 address 0x{HERE:x} etype 15 brk_id 0 pc 0x{HERE:x} m4 55",
                                       "signal 46 dbg 55"]
