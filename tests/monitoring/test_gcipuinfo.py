# The gcipuinfo-compatible API over a real mount: the values `ipufs info`
# prints, the attached process, the update modes, the health check, the
# event record and the errors bad input gets (docs/monitoring.md).
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ipufs.monitoring import ipuinfo
from ipufs.monitoring.paths import module_dir
from tests.integration.harness import PyClient, RunningDaemon, ipufs_command, running_daemon
from tests.monitoring.conftest import consumer_env, device_info, ipufs, run_consumer

pytestmark = pytest.mark.mount


@pytest.fixture
def info(board: RunningDaemon, monkeypatch: pytest.MonkeyPatch) -> ipuinfo.gcipuinfo:
    monkeypatch.setenv(ipuinfo.DEV_ENV, str(board.mountpoint))
    return ipuinfo.gcipuinfo()


def test_devices_carry_what_ipufs_info_prints(board: RunningDaemon, attached: PyClient,
                                              info: ipuinfo.gcipuinfo) -> None:
    printed = device_info(ipufs("info", "--dev", str(board.mountpoint)))
    got = info.getDevices()
    assert [d["id"] for d in got] == ["0", "1", "2", "3"]
    for mine, theirs in zip(got, printed):
        assert mine == theirs and list(mine) == list(theirs)
    one = got[1]
    assert one["user process id"] == str(attached.proc.pid)
    assert one["user executable"] == os.path.basename(os.path.realpath(sys.executable))
    assert one["user name"] == "root" and "user process id" not in got[0]
    assert one["ipu power"] == "12.60W" and one["clock"] == "1330MHz" and one["average die temp"] == "45.0 C"
    assert one["ipu utilisation (session)"] == "0.00%"  # attached, but no tile has run


def test_named_attributes_and_their_constants(attached: PyClient, info: ipuinfo.gcipuinfo) -> None:
    assert info.getNamedAttributeForAll(ipuinfo.IpuPower) == ["12.60W"] * 4  # type: ignore[attr-defined]
    assert info.getNamedAttributeForDevice(2, ipuinfo.BoardType) == "M2000"  # type: ignore[attr-defined]
    pids = info.getNamedAttributeForAll(ipuinfo.UserProcessId)  # type: ignore[attr-defined]
    assert pids == ["N/A", str(attached.proc.pid), "N/A", "N/A"]
    assert info.getNamedAttributeForDevice(0, "link correctable error count") == "0"
    assert info.getNamedAttributeForDevice(0, "link correctable error count (session)") == "N/A"  # never attached


def test_data_is_read_again_only_when_asked(board: RunningDaemon, info: ipuinfo.gcipuinfo) -> None:
    ipufs("inject", "--dev", str(board.mountpoint), "telemetry", "-d", "3", "--clock", "665")
    assert info.getNamedAttributeForDevice(3, "clock") == "1330MHz"  # the data read when built
    assert info.updateData() is True
    assert info.getNamedAttributeForDevice(3, "clock") == "665MHz"
    assert info.getNamedAttributeForDevice(3, "ipu power") == "10.30W"  # the clock tree's half: 8 + 4.6/2
    ipufs("inject", "--dev", str(board.mountpoint), "telemetry", "-d", "3", "--temperature", "71.5")
    info.setUpdateMode(True)
    assert info.getNamedAttributeForDevice(3, "average die temp") == "71.5 C"


def test_bad_input_gets_the_documented_errors(board: RunningDaemon, info: ipuinfo.gcipuinfo) -> None:
    with pytest.raises(IndexError, match="device id 4 does not exist"):
        info.getNamedAttributeForDevice(4, "clock")
    with pytest.raises(ValueError, match="unknown attribute label 'ipu powr'"):
        info.getNamedAttributeForAll("ipu powr")
    with pytest.raises(ValueError, match="unknown attribute label"):
        info.getNamedAttributeForDevice(0, "")
    with pytest.raises(ValueError, match="unknown discovery mode 7"):
        ipuinfo.gcipuinfo(7)
    assert len(ipuinfo.gcipuinfo(ipuinfo.DiscoverAllPartitionIPUs).getDevices()) == 4


def test_health_reports_what_the_model_holds(board: RunningDaemon, info: ipuinfo.gcipuinfo) -> None:
    m = str(board.mountpoint)
    assert info.checkHealthOfDevices() == "{}"
    ipufs("inject", "--dev", m, "link-down", "-d", "2")
    ipufs("inject", "--dev", m, "exception", "-d", "0", "--cause", "parity")
    ipufs("inject", "--dev", m, "icu-timeout", "-d", "3")
    [failing] = json.loads(info.checkHealthOfDevices())["hosts"].values()
    p = str(board.mountpoint)  # the partition: the mount (no $IPUOF_VIPU_API_PARTITION_ID here)
    assert failing == [
        {"error": "device", "id": "0", "partition": p, "board ipu index": "0",
         "reason": "exception held (parity): clear it or reset the IPU"},
        {"error": "connection", "id": "2", "partition": p, "board ipu index": "2", "reason": "link down"},
        {"error": "device", "id": "3", "partition": p, "board ipu index": "3", "reason": "ICU not answering"},
    ]
    for kind, ipu in (("link-up", "2"), ("reset", "0"), ("icu-recover", "3")):
        ipufs("inject", "--dev", m, kind, "-d", ipu)
    assert info.checkHealthOfDevices() == "{}"


def test_a_c600_has_no_ipu_power(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu21") as d:
        monkeypatch.setenv(ipuinfo.DEV_ENV, str(d.mountpoint))
        info = ipuinfo.gcipuinfo()
        assert info.getNamedAttributeForAll("ipu power") == ["N/A"]  # as gc-info prints on a C600
        assert info.getNamedAttributeForAll("target") == ["PCIe"]  # as Graphcore's C600 sample
        assert info.getNamedAttributeForDevice(0, "total board power") == "185.0 W"


def test_no_ipus_is_an_empty_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ipuinfo.DEV_ENV, str(tmp_path))
    info = ipuinfo.gcipuinfo()
    assert info.getDevices() == [] and info.getNamedAttributeForAll("clock") == []
    with pytest.raises(IndexError, match="no IPUs were found"):
        info.getNamedAttributeForDevice(0, "clock")


def test_the_last_event_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ipuinfo.DEV_ENV, str(tmp_path))
    info = ipuinfo.gcipuinfo()
    records = tmp_path / "records"
    records.mkdir()
    assert info.getLastAppEventRecord(str(records)) == {}
    (records / "old.json").write_text(json.dumps({"severity": "warning"}))
    os.utime(records / "old.json", (1, 1))
    (records / "new.json").write_text(json.dumps({"severity": "error", "pid": 42, "attached ipus": [0, 1]}))
    assert info.getLastAppEventRecord(str(records)) == {
        "event record path": str(records / "new.json"), "severity": "error", "pid": "42",
        "attached ipus": "[0, 1]"}
    monkeypatch.setenv(ipuinfo.EVENT_RECORD_ENV, str(records))
    assert json.loads(info.getLastAppEventRecordAsJSON())["attached ipus"] == [0, 1]
    assert info.getLastAppEventRecordAsJSON(str(tmp_path / "none")) == "{}"


def test_import_gcipuinfo_finds_ipufs_and_a_real_one_wins(board: RunningDaemon, tmp_path: Path) -> None:
    script = "import gcipuinfo; print(gcipuinfo.__name__, gcipuinfo.gcipuinfo().getNamedAttributeForAll(gcipuinfo.IpuPower))"
    env = consumer_env(board.mountpoint)
    assert run_consumer(script, env) == "gcipuinfo ['12.60W', '12.60W', '12.60W', '12.60W']\n"
    real = tmp_path / "site"
    real.mkdir()
    (real / "gcipuinfo.py").write_text("IpuPower = 'ipu power'\nclass gcipuinfo:\n"
                                       "    def getNamedAttributeForAll(self, label): return ['real']\n")
    env["PYTHONPATH"] += os.pathsep + str(real)  # after ipufs's directory: it still wins
    assert run_consumer(script, env) == "gcipuinfo ['real']\n"


def test_ipufs_run_gives_its_command_the_module() -> None:
    script = ("import gcipuinfo, os; i = gcipuinfo.gcipuinfo(); "
              "print(i.getNamedAttributeForAll(gcipuinfo.IpuPower), i.getNamedAttributeForDevice(1, 'pci id'))")
    out = subprocess.run(ipufs_command("run", "--ipus", "2", "--", sys.executable, "-c", script),
                         capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                                           if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "['12.60W', '12.60W'] 0000:1b:00.0\n"  # /dev/ipuN of the command's own namespace


def test_gcipuinfo_path_names_the_module_directory() -> None:
    assert Path(ipufs("gcipuinfo-path").strip(), "gcipuinfo.py").is_file()


def test_a_python_without_ipufs_is_told_why(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.append({str(module_dir())!r}); "
                          "import gcipuinfo"], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert out.returncode == 1
    assert "gcipuinfo: ipufs's module runs in a Python that has ipufs installed" in out.stderr


def test_the_event_record_keys_and_severities_of_the_reference() -> None:
    documented = {"keyRecordPath": "event record path", "keyTimestamp": "timestamp", "keySeverity": "severity",
                  "keyCommandLine": "command line", "keyPid": "pid", "keyAttachedIPUs": "attached ipus",
                  "keySpecificIPUs": "specific ipus", "keyAttachedIPUHosts": "attached ipu hosts",
                  "keySpecificIPUHosts": "specific ipu hosts", "keyPartition": "partition",
                  "keyDescription": "description"}
    for name, key in documented.items():  # static members of the class, and module names
        assert getattr(ipuinfo.gcipuinfo, name) == getattr(ipuinfo, name) == key
    assert ipuinfo.EventSeverity.Info < ipuinfo.EventSeverity.Warning < ipuinfo.EventSeverity.Error
    assert set(documented) | {"EventSeverity"} <= set(ipuinfo.__all__)


def test_the_labels_gc_info_prints_now(board: RunningDaemon, attached: PyClient, info: ipuinfo.gcipuinfo) -> None:
    m = str(board.mountpoint)
    ipufs("inject", "--dev", m, "link-errors", "-d", "1", "--count", "2")
    info.setUpdateMode(True)
    labels = ipuinfo  # the constants, as a program names them
    assert info.getNamedAttributeForDevice(1, labels.LinkCorrectableErrorCount) == "2"  # type: ignore[attr-defined]
    assert info.getNamedAttributeForDevice(1, labels.LinkCorrectableErrorCountSession) == "2"  # type: ignore[attr-defined]
    assert info.getNamedAttributeForAll(labels.ParityErrorCountThreshold) == ["N/A"] * 4  # type: ignore[attr-defined]
    assert info.getNamedAttributeForAll(labels.ParityErrorThresholdInterval) == ["N/A"] * 4  # type: ignore[attr-defined]
    started = info.getNamedAttributeForAll(labels.ProcessStartTime)  # type: ignore[attr-defined]
    assert started[0] == "N/A" and re.fullmatch(r"\d{8}T\d{6}Z", started[1])
    assert info.getNamedAttributeForAll(labels.Target) == ["Fabric"] * 4  # type: ignore[attr-defined]


def test_the_health_report_names_the_partition(board: RunningDaemon, info: ipuinfo.gcipuinfo,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ipufs("inject", "--dev", str(board.mountpoint), "link-down", "-d", "1")
    monkeypatch.setenv(ipuinfo.PARTITION_ENV, "p1")  # as Poplar names its V-IPU partition
    [[failing]] = json.loads(info.checkHealthOfDevices())["hosts"].values()
    assert failing["partition"] == "p1" and failing["id"] == "1" and failing["error"] == "connection"
