# `ipufs inject` and `ipufs trace` as a test author types them, through the
# real CLI and a real mount: options after the fault's name, the usage of
# icu-message, and every mistake answered by a non-zero exit and one line on
# stderr naming the problem and the fix, never a traceback.
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ipufs.model.profile import PROFILES
from tests.integration.harness import RunningDaemon, ipufs_command

pytestmark = pytest.mark.mount


def ipufs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ipufs_command(*args), capture_output=True, text=True, timeout=30)


def test_options_may_follow_the_fault_name(board: RunningDaemon) -> None:
    address = PROFILES["ipu2"].tile_memory_base + 0x10  # a word of tile memory
    out = ipufs("inject", "parity", "-d", "2", "--tile", "5", "--addr", hex(address), "--dev", str(board.mountpoint))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"parity ipu=2 address={address} tile=5"
    out = ipufs("inject", "--dev", str(board.mountpoint), "telemetry", "--power", "12.5", "--json")
    assert out.returncode == 0 and '"fired": "telemetry ipu=0 power_mw=12500"' in out.stdout


def test_icu_message_usage_names_the_words() -> None:
    out = ipufs("inject", "icu-message", "--help")
    assert out.returncode == 0 and "W0 W1 W2 W3 W4" in out.stdout and "words words" not in out.stdout


def test_a_plan_is_loaded_and_cleared(board: RunningDaemon, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('seed = 4\n[[fault]]\nkind = "reset"\nipu = 1\nafter = 3\n')
    dev = ("--dev", str(board.mountpoint))
    out = ipufs("inject", "plan", str(plan), *dev)
    assert (out.returncode, out.stdout.strip()) == (0, "fault plan of 1 faults loaded (seed 4)")
    out = ipufs("inject", "plan", "--clear", *dev)
    assert (out.returncode, out.stdout.strip()) == (0, "fault plan cleared")
    plan_now = board.daemon.plans.plan
    assert plan_now is not None and plan_now.entries == []
    # Nothing counts accesses any more, so the native fast path is not held for it.
    assert not board.daemon.plans.counting
    assert b"fault plan" not in os.getxattr(board.mountpoint, "user.ipufs.fast_path")


MISTAKES = [
    (["icu-timeout", "--for", "2x"], 2, "--for: '2x' is not a duration: give seconds like 2s, 500ms"),
    (["icu-timeout", "--for", "nan"], 2, "--for: 'nan' is out of range"),
    (["exception", "--tile", "99999"], 1, "--tile: tile must be an integer 0..1471, got 99999"),
    (["exception", "--tile", "0x10000000000"], 1, "--tile: tile must be an integer 0..1471"),
    (["telemetry", "--power", "-1"], 2, "--power: -1 W is out of range 0..4294967.295"),
    (["telemetry"], 1, "telemetry takes one or more of temperature_mc, power_mw, clock_mhz"),
    (["icu-message", "1", "2", "3", "4", "0x100000000"], 2, "W4: 0x100000000 does not fit a u32"),
    (["sync", "gs9"], 2, "zone must be one of gs1, gs1h"),
    (["-d", "9", "reset"], 1, "ipu must be an integer 0..3, got 9"),
    (["explode"], 2, "invalid choice: 'explode'"),
    (["plan"], 1, "give a plan FILE, or --clear"),
]


@pytest.mark.parametrize("args,status,message", MISTAKES, ids=[" ".join(a) for a, _, _ in MISTAKES])
def test_each_mistake_is_one_line_and_a_nonzero_exit(board: RunningDaemon, args: list[str], status: int,
                                                     message: str) -> None:
    out = ipufs("inject", *args, "--dev", str(board.mountpoint))
    assert out.returncode == status, out.stderr
    assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
    assert message in out.stderr and out.stderr.startswith("ipufs inject"), out.stderr


@pytest.mark.parametrize("text,message", [
    ('[[faults]]\nkind = "reset"\nafter = 1\n', "a plan has no key or table 'faults'; did you mean fault?"),
    ('[[fault]]\nkind = "exception"\ncouse = "parity"\nafter = 1\n',
     "fault 1: exception takes no 'couse'; did you mean cause?"),
    ('[[fault]]\nkind = "telemetry"\nclock_mhz = -1\nafter = 1\n', "fault 1: clock_mhz must be an integer"),
])
def test_a_mistaken_plan_is_refused_naming_file_and_key(board: RunningDaemon, tmp_path: Path, text: str,
                                                        message: str) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    out = ipufs("inject", "plan", str(plan), "--dev", str(board.mountpoint))
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"ipufs inject: {plan}: {message}")


def test_no_devices_is_one_line_for_inject_and_trace(tmp_path: Path) -> None:
    for command in (["inject", "reset"], ["trace"]):
        out = ipufs(*command, "--dev", str(tmp_path))
        assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr
        assert f"no IPUs in {tmp_path} (no ipuN nodes there): mount some: run `ipufs mount` as root" in out.stderr


def test_trace_refuses_a_bad_ipu_in_one_line(board: RunningDaemon) -> None:
    out = ipufs("trace", "-d", "7", "--dev", str(board.mountpoint))
    assert out.returncode == 1 and out.stderr.strip() == "ipufs trace: ipu must be an integer 0..3, got 7"
