# Utilisation and power come from what the tiles run (docs/execution.md,
# "Utilisation and power"): through a real mount, a loop on a quarter of an
# IPU's tiles brings `ipufs info`, `ipufs monitor`, the sysfs view and the
# exporter to 25.00% and the power model's figure for it; a reset, or the
# tiles' own exit, brings every one back to the idle figures.
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ipufs import cli
from ipufs.abi.pci import pci_address
from ipufs.client import Device
from ipufs.client.execution import context_status
from tests.integration.harness import RunningDaemon
from tests.monitoring.conftest import ExporterProcess, ipufs
from tests.monitoring.test_exporter import scrape, value

pytestmark = pytest.mark.mount

LOOP = """\
    .text 0x4c000
    .supervisor
_start:
    bri _start
"""

#: a worker that counts down, then exits: its tile is idle again (400,000
#: instructions, a few ms at the native loop's rate: the host starts the
#: tiles one by one, and the daemon counts a tile busy from the start of
#: the slice in which it ran)
COUNTDOWN = """\
    .text 0x4c000
    .worker
_start:
    setzi $m1, 200000
loop:
    brnzdec $m1, loop
    exitz $m15
"""

QUARTER = range(368)  # of an ipu2's 1472 tiles
#: 12.6 W idle + 137.4 W x 0.25 (docs/monitoring.md, "Power model")
BUSY_W = 46.95


def _load(board: RunningDaemon, tmp_path: Path, source: str) -> Device:
    (tmp_path / "k.s").write_text(source)
    assert cli.main(["asm", str(tmp_path / "k.s"), "--arch", "ipu2", "-o", str(tmp_path / "k.elf")]) == 0
    device = Device(0, board.mountpoint)
    device.load_elf((tmp_path / "k.elf").read_bytes(), QUARTER)
    return device


def _info(board: RunningDaemon, ipu: int = 0) -> dict[str, Any]:
    out: list[dict[str, Any]] = json.loads(ipufs("info", "-d", str(ipu), "--json", "--dev", str(board.mountpoint)))
    return out[0]


def _until(what: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.05)


def _figures(board: RunningDaemon, exporter: ExporterProcess, ipu: int) -> dict[str, object]:
    """Utilisation and power as each consumer shows them."""
    info = _info(board, ipu)
    row = json.loads(ipufs("monitor", "--json", "--dev", str(board.mountpoint)))["ipus"][ipu]
    sysfs = board.mountpoint / "sys" / "bus" / "pci" / "devices" / pci_address(ipu)
    s = scrape(exporter)
    return {
        "info": (info["ipu_utilisation_percent"], info["ipu_power_w"]),
        "monitor": (row["utilisation_percent"], row["ipu_power_w"]),
        "sysfs": ((sysfs / "ipu_utilisation").read_text(), (sysfs / "ipu_power").read_text()),
        "exporter": (value(s, "ipufs_ipu_utilisation_ratio", str(ipu)), value(s, "ipufs_ipu_power_watts", str(ipu))),
    }


IDLE = {"info": (0.0, 12.6), "monitor": (0.0, 12.6), "sysfs": ("0.00%\n", "12.60W\n"), "exporter": (0.0, 12.6)}
BUSY = {"info": (25.0, BUSY_W), "monitor": (25.0, BUSY_W), "sysfs": ("25.00%\n", f"{BUSY_W:.2f}W\n"),
        "exporter": (0.25, BUSY_W)}


def test_a_loop_on_a_quarter_of_the_tiles_shows_everywhere_until_a_reset(
        board: RunningDaemon, exporter: ExporterProcess, tmp_path: Path) -> None:
    assert _figures(board, exporter, 0) == IDLE
    with _load(board, tmp_path, LOOP) as device:
        device.attach()
        device.start(0x4C000, QUARTER)
        # A second after the start every quarter-tile has been busy the whole window.
        _until(lambda: device.read_register("UTILISATION") == 2500)
        assert _figures(board, exporter, 0) == BUSY
        assert _figures(board, exporter, 1) == IDLE  # the other IPUs ran nothing
        session = _info(board)["ipu_utilisation_session_percent"]
        assert 0 < session <= 25.0  # attached a little before the tiles started
        ipufs("reset", "-d", "0", "--dev", str(board.mountpoint))
        _until(lambda: device.read_register("UTILISATION") == 0, timeout=5)
        assert _figures(board, exporter, 0) == IDLE


def test_tiles_that_exit_fall_back_to_idle(board: RunningDaemon, tmp_path: Path) -> None:
    with _load(board, tmp_path, COUNTDOWN) as device:
        device.start(0x4C000, QUARTER, context=1)
        _until(lambda: device.read_register("UTILISATION") > 0)
        busy = device.read_register("IPU_POWER")
        assert 12_600 < busy <= BUSY_W * 1000
        # Every worker exits (no context is active: CTXT_STS 0), then the window empties.
        _until(lambda: not any(any(context_status(device, t)) for t in (0, 367)))
        _until(lambda: device.read_register("UTILISATION") == 0, timeout=5)
        assert device.read_register("IPU_POWER") == 12_600
    info = _info(board)
    assert (info["ipu_utilisation_percent"], info["ipu_power_w"]) == (0.0, 12.6)
