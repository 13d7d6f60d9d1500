# Faults and traces for test authors, through a real mount: each fault kind
# seen by a real client through the nodes and signals; a fault plan replayed
# twice fires the same sequence; the trace of a scripted session matches
# what the client did.
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ipufs.client import Control, ControlError
from ipufs.abi.icu import Op, op_word
from ipufs.abi.registers import ExceptionCause
from ipufs.model.profile import PROFILES
from tests.integration.harness import PyClient as Client
from tests.integration.harness import RunningDaemon, ipufs_command, running_daemon, wait_for

pytestmark = pytest.mark.mount


@pytest.fixture
def client(py_client: Callable[[int], Client]) -> Callable[[int], Client]:
    """Starts a client on an IPU, attached, with id 10 + the IPU."""

    def start(ipu: int = 0) -> Client:
        c = py_client(ipu)
        assert c("attach") == "ok" and c(f"setid {10 + ipu}") == "ok"
        return c

    return start


def inject(board: RunningDaemon, *args: str) -> str:
    out = subprocess.run(ipufs_command("inject", "--dev", str(board.mountpoint), *args), capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_exception_fault(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    c = client(1)
    assert inject(board, "-d", "1", "exception", "--cause", "misaligned", "--tile", "3", "--addr", "0x40002") == \
        "exception ipu=1 address=262146 cause=misaligned context=0 tile=3"
    assert c("signals 1 2000") == "signals 44:11"
    assert [c(f"reg {r}") for r in ("EXC_CAUSE", "EXC_TILE", "EXC_ADDRESS")] == [
        str(ExceptionCause.MISALIGNED), "3", str(0x40002)]


def test_parity_fault(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    c = client(0)
    address = hex(PROFILES["ipu2"].tile_memory_base + 0x10)  # a word of tile memory
    inject(board, "parity", "--tile", "5", "--addr", address)
    assert c(f"tdi-mem-read 5 {address} 8").split()[0] == "PARITY"
    assert c("signals 1 2000") == "signals 44:10"


@pytest.mark.parametrize("zone,signal", [("gs1", 46), ("gs1-master", 47), ("gs2", 48), ("gs2h-master", 49)])
def test_sync_completion_faults(board: RunningDaemon, client: Callable[[int], Client], zone: str, signal: int) -> None:
    c = client(2)
    inject(board, "-d", "2", "sync", zone)
    assert c("signals 1 2000") == f"signals {signal}:12"


def test_device_side_arrival_completes_a_gs2_barrier(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    hosts = [client(i) for i in range(3)]
    for h in hosts:
        assert h("set CMD_SYNC 6") == "ok"
    inject(board, "-d", "3", "sync", "gs2", "--arrive")  # the fourth member arrives from the device side
    assert [h("signals 1 2000") for h in hosts] == ["signals 48:10", "signals 48:11", "signals 48:12"]


def test_icu_timeout_and_recovery(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    c = client(0)
    inject(board, "icu-timeout", "--for", "300ms")
    assert c(f"icu {op_word(Op.READ_CLOCK)} 0 0 0 0") == f"error {errno.ETIMEDOUT}"
    assert int(c("reg STATUS")) & 8
    assert wait_for(lambda: c(f"icu {op_word(Op.READ_CLOCK)} 0 0 0 0") == f"{op_word(Op.READ_CLOCK)} 1330 0 0 0", 3)
    assert int(c("reg STATUS")) & 8 == 0
    inject(board, "icu-timeout")  # until told otherwise
    assert c(f"mbox-post {op_word(Op.READ_POWER)} 0 0 0 0") == "ok" and c("mbox-ring") == "ok"
    assert c("mbox-wait 200") == "timeout"  # taken, never answered
    inject(board, "icu-recover")
    assert c(f"icu {op_word(Op.READ_POWER)} 0 0 0 0").split()[1] == "150000"


def test_link_down_and_up(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    c = client(3)
    inject(board, "-d", "3", "link-down")
    assert c("signals 1 2000") == "signals 44:13"
    assert int(c("reg STATUS")) & 4 and c("reg EXC_CAUSE") == str(ExceptionCause.LINK)
    inject(board, "-d", "3", "link-up")
    assert int(c("reg STATUS")) & 4 == 0


def test_telemetry_icu_message_reset_and_interrupt(board: RunningDaemon, client: Callable[[int], Client]) -> None:
    c = client(1)
    inject(board, "-d", "1", "telemetry", "--temperature", "91.5", "--power", "200", "--clock", "900")
    assert c(f"icu {op_word(Op.READ_TEMPERATURE)} 0 0 0 0").split()[1] == "91500"
    assert (c("reg POWER"), c("reg CLOCK")) == ("200000", "900")
    inject(board, "-d", "1", "icu-message", "0x1", "2", "3", "4", "5")
    assert c("signals 1 2000") == "signals 45:11"
    assert c("icu-recv") == "1 2 3 4 5"
    inject(board, "-d", "1", "reset")
    assert c("reg RESET_COUNT") == "1"
    inject(board, "-d", "1", "interrupt", "gs2_e1")
    assert c("signals 1 2000") == "signals 49:11"


def test_bad_faults_are_refused_with_a_reason(board: RunningDaemon) -> None:
    with Control.of_mount(board.mountpoint) as control:
        for request, reason in (({"kind": "explode"}, "unknown fault kind"),
                                ({"kind": "exception", "cause": "bored"}, "cause must be one of"),
                                ({"kind": "parity", "tile": 1}, "parity needs address"),
                                ({"kind": "sync", "zone": 3}, "zone must be"),
                                ({"kind": "reset", "ipu": 9}, r"ipu must be an integer 0\.\.3, got 9"),
                                ({"kind": "exception", "couse": "parity"}, "did you mean cause")):
            with pytest.raises(ControlError, match=reason):
                control.request("inject", **request)
        assert control.status()["mode"] == "passthrough"
        assert control.inject("telemetry", 2, clock_mhz=700) == "telemetry ipu=2 clock_mhz=700"


PLAN = """
seed = 11
[[fault]]
kind = "exception"
ipu = 0
cause = "parity"
probability = 0.2

[[fault]]
kind = "interrupt"
ipu = 0
source = "gs1_e0"
every = 7
times = 3

[[fault]]
kind = "parity"
ipu = 0
tile = 1
address = 0x100000
after = 5
"""

WORKLOAD = """
import os, sys
from ipufs.client import Device, SignalReceiver
signals = SignalReceiver()  # the plan's faults signal this process
with Device(0, sys.argv[1]) as dev:
    dev.attach()
    for i in range(60):
        dev.set_ipu_id(i)
"""


def run_plan(tmp_path: Path, name: str, via_mount: bool) -> list[Any]:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    options = {"fault_plan": str(plan)} if via_mount else {}
    with running_daemon(tmp_path / name, ipus=1, profile="ipu1", **options) as d:
        with Control.of_mount(d.mountpoint) as control:
            if not via_mount:
                assert control.request("plan", toml=PLAN) == {"faults": 3, "seed": 11}
            subprocess.run([sys.executable, "-c", WORKLOAD, str(d.mountpoint)], check=True, timeout=60)
            return control.request("plan-log")["log"]


def test_a_fault_plan_replays_exactly(tmp_path: Path) -> None:
    first = run_plan(tmp_path, "a", via_mount=True)
    second = run_plan(tmp_path, "b", via_mount=False)
    assert first == second
    kinds = [entry[2].split()[0] for entry in first]
    assert kinds.count("interrupt") == 3 and kinds.count("parity") == 1 and 3 <= kinds.count("exception") <= 25
    assert [e[1] for e in first if e[2].startswith("interrupt")] == [7, 14, 21]


SESSION = """
import os, struct, sys
from ipufs.client import Device, SignalReceiver
from ipufs.abi.icu import Op, op_word
signals = SignalReceiver()
with Device(0, sys.argv[1]) as dev:
    dev.attach()
    dev.set_ipu_id(5)
    dev.write_register("SCRATCH", 0xBEEF)
    dev.read_register("VENDOR_ID")
    dev.icu_transfer((op_word(Op.READ_CLOCK), 0, 0, 0, 0))
    dev.sync(4)
    signals.wait_for(1, 5)
"""


def test_trace_of_a_scripted_session(board: RunningDaemon) -> None:
    tracer = subprocess.Popen(ipufs_command("trace", "--json", "-d", "0", "--dev", str(board.mountpoint)),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: board.daemon.tracer.enabled, 10)
        subprocess.run([sys.executable, "-c", SESSION, str(board.mountpoint)], check=True, timeout=60)
        assert tracer.stdout is not None
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e["kind"] == "detach" for e in events):
            events.append(json.loads(tracer.stdout.readline()))
    finally:
        tracer.kill()
        tracer.communicate()
    summary = []
    for e in events:
        if e["kind"] == "ioctl":
            summary.append(f"ioctl {e['name']}")
        elif e["kind"] in ("register-read", "register-write"):
            summary.append(f"{e['kind']} {','.join(e['registers'])}")
        elif e["kind"] == "signal":
            summary.append(f"signal {e['signo']} si_int={e['si_int']}")
        elif e["kind"] == "icu":
            summary.append(f"icu {e['op']}")
        elif e["kind"] in ("attach", "detach"):
            summary.append(e["kind"])
    assert summary == [
        "attach", "ioctl ATTACH", "ioctl SET_IPU_ID", "register-write SCRATCH", "register-read VENDOR_ID",
        "icu READ_CLOCK", "ioctl MAILBOX_WRITE_READ", "register-write CMD_SYNC", "signal 46 si_int=5", "detach"]
    opens = [e["node"] for e in events if e["kind"] == "open"]
    assert opens == ["ipu0", "ipu0_ex"]
    assert not board.daemon.tracer.enabled or wait_for(
        lambda: not board.daemon.tracer.enabled, 5)


def test_the_trace_file_is_bounded(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", trace_file=str(trace),
                        trace_max_bytes=4096) as d:
        subprocess.run([sys.executable, "-c", WORKLOAD, str(d.mountpoint)], check=True, timeout=60)
    assert trace.stat().st_size <= 4096 and (tmp_path / "trace.jsonl.1").stat().st_size <= 4096
    last = [json.loads(line) for line in trace.read_text().splitlines()]
    assert last[0]["kind"] == "trace-file"  # every file of ours begins so
    assert last[1:] and all(e["kind"] in ("ioctl", "open", "close", "detach", "attach") for e in last[1:])


def test_trace_subscribers_that_vanish_do_not_hurt_the_daemon(board: RunningDaemon) -> None:
    for _ in range(3):
        tracer = subprocess.Popen(ipufs_command("trace", "--json", "--dev", str(board.mountpoint)),
                                  stdout=subprocess.PIPE, text=True)
        assert wait_for(lambda: board.daemon.tracer.enabled, 10)
        subprocess.run([sys.executable, "-c", WORKLOAD, str(board.mountpoint)], check=True, timeout=60)
        tracer.kill()  # with events still flowing to it
        tracer.communicate()
        assert wait_for(lambda: not board.daemon.tracer.enabled, 5)
    subprocess.run([sys.executable, "-c", WORKLOAD, str(board.mountpoint)], check=True, timeout=60)
    assert os.getxattr(board.mountpoint, "user.ipufs.ipus") == b"4"


def test_status_counts_requests_and_passthrough_io_makes_none(board: RunningDaemon) -> None:
    mem = os.open(board.path("ipu1_mem"), os.O_RDWR)
    config = os.open(board.path("ipu1"), os.O_RDWR)
    try:
        # The first write to an inode asks for security.capability once (then
        # the kernel marks it S_NOSEC): a request, but only the first.
        os.pwrite(mem, b"x", 0)
        with Control.of_mount(board.mountpoint) as control:
            before = control.status()["requests"]
            for _ in range(50):
                os.pwrite(mem, b"x" * 4096, 0)
                os.pread(mem, 4096, 0)
            after_mem = control.status()["requests"]
            assert after_mem == before  # the kernel served them from the backing file
            for _ in range(50):
                os.pread(config, 4, 0)
            assert control.status()["requests"] >= after_mem + 50  # config space is the daemon's
    finally:
        os.close(mem)
        os.close(config)
