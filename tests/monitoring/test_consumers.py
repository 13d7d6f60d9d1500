# Real consumers of the gcipuinfo API, run unchanged in their own processes
# against a mount: the IPU collector of the Weights & Biases client
# (wandb 0.17.9, installed by `./dev setup` in .venv/wandb-0.17.9, since
# its protobuf pin conflicts with the device plugin's), and a power loop
# written the way Graphcore's public power-consumption example is.
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, TIMEOUT, PyClient, RunningDaemon, running_daemon
from tests.monitoring.conftest import consumer_env, device_info, ipufs, run_consumer

pytestmark = pytest.mark.mount
WANDB = ROOT / ".venv" / "wandb-0.17.9"

# wandb's own collector: the class its system monitor samples with, given
# the pid it watches, as wandb builds it from settings._stats_pid.
COLLECTOR = """
import json, sys
from wandb.sdk.internal.system.assets.ipu import IPU, IPUStats
assert IPU.is_available()  # wandb found `import gcipuinfo`
stats = IPUStats(int(sys.argv[1]))
stats.sample()
stats.sample()
print(json.dumps({"samples": list(stats.samples), "aggregate": stats.aggregate()}))
"""


@pytest.mark.skipif(not (WANDB / "wandb").is_dir(), reason=f"wandb 0.17.9 is not installed in {WANDB} "
                    "(./dev setup installs it)")
def test_wandb_collector_samples_the_attached_ipu(board: RunningDaemon, attached: PyClient) -> None:
    m = str(board.mountpoint)
    ipufs("inject", "--dev", m, "telemetry", "-d", "1", "--temperature", "52.5", "--clock", "1200")
    before = device_info(ipufs("info", "-d", "1", "--dev", m))[0]
    out = subprocess.run([sys.executable, "-c", COLLECTOR, str(attached.proc.pid)], capture_output=True, text=True,
                         env=consumer_env(board.mountpoint, str(WANDB)), timeout=120, cwd="/")
    after = device_info(ipufs("info", "-d", "1", "--dev", m))[0]
    assert out.returncode == 0, out.stderr
    assert "IPU stats error" not in out.stderr, out.stderr
    got = json.loads(out.stdout)
    first, second = got["samples"]
    assert {k.split(".")[1] for k in first} == {"1"}  # only the IPU its process holds
    # ipufs info printed the same before and after, and so did the samples
    for key, unit in (("clock", "MHz"), ("ipu power", "W"), ("average die temp", "C"),
                      ("average board temp", "C"), ("ipu utilisation (session)", "%")):
        assert before[key] == after[key], key
        printed = float(before[key].removesuffix(unit).strip())
        assert first[f"ipu.1.{key} ({unit})"] == second[f"ipu.1.{key} ({unit})"] == printed, key
    assert first["ipu.1.clock (MHz)"] == 1200 and first["ipu.1.average die temp (C)"] == 52.5
    assert first["ipu.1.ipu power (W)"] == pytest.approx(8.0 + 4.6 * 1200 / 1330, abs=0.005)
    # utilisation is the tiles': the process holds the IPU but runs no tile code
    assert first["ipu.1.ipu utilisation (session) (%)"] == 0
    assert first["ipu.1.ipu utilisation (%)"] == second["ipu.1.ipu utilisation (%)"] == 0
    assert before["ipu utilisation"] == after["ipu utilisation"] == "0.00%"
    # the first sample also logs the fixed attributes wandb can parse
    assert first["ipu.1.id"] == 1 and first["ipu.1.user process id"] == attached.proc.pid
    assert got["aggregate"]["ipu.1.clock (MHz)"] == 1200


@pytest.mark.skipif(not (WANDB / "wandb").is_dir(), reason=f"wandb 0.17.9 is not installed in {WANDB}")
def test_wandb_collector_skips_ipus_of_other_processes(board: RunningDaemon, attached: PyClient) -> None:
    out = run_consumer(COLLECTOR.replace("int(sys.argv[1])", "1"), consumer_env(board.mountpoint, str(WANDB)))
    assert json.loads(out)["samples"] == [{}, {}]


# As Graphcore's gc_power_consumption example reads power: every IPU's
# IpuPower, "N/A" left out, the trailing "W" cut off; or chosen devices
# one by one. One sample per line of stdin, so the test can act between.
POWER_LOOP = """
import sys
import gcipuinfo

ipu_info = gcipuinfo.gcipuinfo()
num_devices = len(ipu_info.getDevices())
if num_devices == 0:
    print("error: no IPUs detected", file=sys.stderr)
    sys.exit(1)

def pow_to_float(pow):
    try:
        return float(pow[:-1])
    except ValueError:
        return 0

def get_ipu_power_all():
    device_powers = ipu_info.getNamedAttributeForAll(gcipuinfo.IpuPower)
    return [pow_to_float(pow) for pow in device_powers if pow != "N/A"]

def get_ipu_power_from_device_list(devices):
    powers = []
    for device_id in devices:
        pow = ipu_info.getNamedAttributeForDevice(device_id, gcipuinfo.IpuPower)
        if pow != "N/A":
            powers.append(pow_to_float(pow))
    return powers

for line in sys.stdin:
    ipu_info.updateData()
    powers = get_ipu_power_all()
    chosen = get_ipu_power_from_device_list([0, num_devices - 1])
    mean = sum(powers) / len(powers) if powers else 0
    print(f"{len(powers)} {mean:.3f} {sum(powers):.2f} {chosen}", flush=True)
"""


class PowerLoop:
    def __init__(self, mountpoint: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", POWER_LOOP], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=consumer_env(mountpoint))

    def sample(self) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        try:
            self.proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def test_power_loop_follows_the_clock(board: RunningDaemon) -> None:
    loop = PowerLoop(board.mountpoint)
    try:
        assert loop.sample() == "4 12.600 50.40 [12.6, 12.6]"
        ipufs("inject", "--dev", str(board.mountpoint), "telemetry", "-d", "0", "--clock", "665")
        assert loop.sample() == "4 12.025 48.10 [10.3, 12.6]"  # IPU 0 at half clock: 8 + 4.6/2 W
        ipufs("inject", "--dev", str(board.mountpoint), "telemetry", "-d", "0", "--clock", "1330")
        assert loop.sample() == "4 12.600 50.40 [12.6, 12.6]"
    finally:
        loop.close()


def test_power_loop_on_cards_without_a_sensor_per_ipu(tmp_path: Path) -> None:
    with running_daemon(tmp_path / "mnt", ipus=2, profile="ipu21") as d:
        loop = PowerLoop(d.mountpoint)
        try:
            assert loop.sample() == "0 0.000 0.00 []"  # every IPU answers N/A, as a C600 does
        finally:
            loop.close()
