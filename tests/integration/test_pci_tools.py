# The generic tools people reach for first, run unmodified inside `ipufs run`
# as root and as an unprivileged user (nobody): pciutils' lspci, hwloc's
# lstopo, lshw, udev's udevadm and pyudev see the emulated IPUs as PCI
# devices with character devices, lm-sensors' sensors and pyudev their
# hwmon class devices, lsof and stat the nodes as /dev/ipuN character
# devices of size 0 (docs/sysfs.md, docs/compat.md).
from __future__ import annotations

import re
import shutil
import sys
import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.compat_harness import Run

pytestmark = pytest.mark.mount

IPUS = 3
ADDRESSES = ["1a:00.0", "1b:00.0", "1c:00.0"]
PYUDEV = """
import pyudev
c = pyudev.Context()
d = pyudev.Devices.from_device_file(c, '/dev/ipu1_ex')
print('node', d.sys_name, d.subsystem, d.device_node, d.device_number)
print('parent', d.parent.sys_name, d.parent.subsystem, d.parent.driver, d.parent.attributes.asstring('vendor'))
print('class', ' '.join(x.sys_name for x in c.list_devices(subsystem='ipu')))
print('pci', ' '.join(x.sys_name for x in c.list_devices(subsystem='pci')))
print('initialized', all(x.is_initialized for x in c.list_devices(subsystem='pci')))
print('hwmon', ' '.join(f'{x.sys_name}:{x.parent.sys_name}:{x.attributes.asstring(\\"name\\")}'
                        for x in c.list_devices(subsystem='hwmon')))
"""
COMMANDS = {
    "lspci-v": "lspci -v -d 1d95:",
    "lspci-vvv": "lspci -vvv",
    "lspci-xxx": "lspci -xxx",
    "lspci-t": "lspci -t",
    "lspci-k": "lspci -k",
    "lspci-vmm": "lspci -vmm -d 1d95:",
    "lspci-b": "lspci -b -v -d 1d95:",
    "lstopo": "lstopo --of console",
    "udevadm-info": "udevadm info /dev/ipu0",
    "udevadm-walk": "udevadm info -a /dev/ipu2_mem",
    "pyudev": f"/usr/bin/python3 -I -c \"{PYUDEV}\"",
    "lshw": "lshw -c generic -businfo",
    "sensors": "sensors",
    "lsof": "sleep 60 < /dev/ipu2 & held=$!; sleep 0.5; lsof -n -p $held -a -d 0; kill $held",
    "stat": "stat -c '%n %F %s' /dev/ipu0 /dev/ipu0_ex",
}
#: Tool -> the Debian package that has it (./dev installs them).
PACKAGES = {"lspci": "pciutils", "udevadm": "udev", "lstopo": "hwloc", "lshw": "lshw", "sensors": "lm-sensors",
            "lsof": "lsof"}


def _missing() -> list[str]:
    missing = [package for tool, package in PACKAGES.items() if shutil.which(tool) is None]
    if subprocess.run(["/usr/bin/python3", "-I", "-c", "import pyudev"], capture_output=True).returncode:
        missing.append("python3-pyudev")
    return missing


def _sections(out: str) -> dict[str, tuple[int, str]]:
    """name -> (status, output) of each command of the script."""
    found = {}
    for m in re.finditer(r"^=== (\S+)\n(.*?)^=== status (\d+)$", out, re.S | re.M):
        found[m.group(1)] = (int(m.group(3)), m.group(2))
    return found


@pytest.fixture(scope="module", params=["root", "nobody"])
def tools(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, tuple[int, str]]]]:
    missing = _missing()
    if missing:
        pytest.skip(f"needs {' '.join(missing)} (apt-get install; ./dev test installs them)")
    script = "".join(f"echo '=== {name}'; {command} 2>&1; echo \"=== status $?\"; " for name, command in
                     COMMANDS.items())
    user = request.param == "nobody"
    run = Run(["--ipus", str(IPUS), "--profile", "ipu2"], ["sh", "-c", script], user=user)
    try:
        assert run.proc.stdout is not None
        out = run.proc.stdout.read()
        status, err = run.finish()
    finally:
        run.close()
    assert status == 0, err
    yield request.param, _sections(out)


def _blocks(text: str) -> dict[str, str]:
    """lspci's output per device (blocks that a blank line ends): address
    -> its lines, without lspci's own warnings (such as libkmod's on a
    machine without its kernel's modules)."""
    blocks = {}
    for block in text.split("\n\n"):
        m = re.search(r"^([0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) .*", block, re.M | re.S)
        if m:
            blocks[m.group(1)] = m.group(0)
    return blocks


def test_lspci_v_shows_four_regions_and_the_driver(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["lspci-v"]
    assert status == 0 and "Cannot open" not in text and "Illegal" not in text, text
    blocks = _blocks(text)
    assert sorted(blocks) == ADDRESSES
    for address, block in blocks.items():
        # pci.ids names 1d95:0004 (ipufs's own id) in the run's copy of it.
        assert f"{address} Processing accelerators: Graphcore Ltd Colossus IPU [M2000] (ipufs) (rev 01)" in block
        assert "\tSubsystem: Graphcore Ltd M2000 (ipufs)\n" in block
        assert len(re.findall(r"^\tMemory at [0-9a-f]+ ", block, re.M)) == 4, block
        assert "\tKernel driver in use: ipu\n" in block + "\n"


def test_lspci_vvv_and_config_space(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    who, out = tools
    for name in ("lspci-vvv", "lspci-xxx", "lspci-t", "lspci-k", "lspci-vmm", "lspci-b"):
        status, text = out[name]
        assert status == 0 and "Cannot open" not in text and "Illegal" not in text, (name, text)
    assert sorted(_blocks(out["lspci-b"][1])) == ADDRESSES
    vvv = _blocks(out["lspci-vvv"][1])["1b:00.0"]
    assert "Region 2: Memory at" in vvv and "(64-bit, prefetchable)" in vvv
    dump = _blocks(out["lspci-xxx"][1])["1a:00.0"]
    rows = re.findall(r"^([0-9a-f]0): ((?:[0-9a-f]{2} ?){16})$", dump, re.M)
    assert rows[0][1].startswith("95 1d 04 00")  # vendor, device
    if who == "root":
        # The whole header and capabilities, as the kernel gives root.
        assert "LnkSta:\tSpeed 16GT/s, Width x16" in vvv
        assert "MSI-X: Enable+ Count=16" in vvv and "Vector table: BAR=4" in vvv and "PBA: BAR=5" in vvv
        assert len(rows) == 16
    else:
        # 64 bytes, as the kernel gives a user.
        assert "Capabilities: <access denied>" in vvv
        assert len(rows) == 4
    assert re.search(r"\[0000:1a\]-+00\.0", out["lspci-t"][1])
    assert out["lspci-k"][1].count("Kernel driver in use: ipu") == IPUS
    assert re.findall(r"^Vendor:\t(.*)$", out["lspci-vmm"][1], re.M) == ["Graphcore Ltd"] * IPUS


def test_lstopo_lists_the_devices(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["lstopo"]
    assert status == 0, text
    assert all(f"PCI {address}" in text for address in ADDRESSES), text


def test_lshw_lists_the_devices(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["lshw"]
    assert status == 0, text
    assert all(f"pci@0000:{address}" in text for address in ADDRESSES), text


def test_udevadm_finds_the_node_and_walks_up_to_the_pci_device(
        tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["udevadm-info"]
    assert status == 0, text
    lines = text.splitlines()
    for line in ("P: /devices/pci0000:1a/0000:1a:00.0/ipu/ipu0", "N: ipu0", "E: DEVNAME=/dev/ipu0",
                 "E: SUBSYSTEM=ipu", "E: MAJOR=240", "E: MINOR=0", "E: ID_PATH=pci-0000:1a:00.0"):
        assert line in lines, text
    assert any(line.startswith("E: USEC_INITIALIZED=") for line in lines)
    status, text = out["udevadm-walk"]
    assert status == 0, text
    assert "looking at device '/devices/pci0000:1c/0000:1c:00.0/ipu/ipu2_mem'" in text
    assert "looking at parent device '/devices/pci0000:1c/0000:1c:00.0'" in text
    for line in ('KERNELS=="0000:1c:00.0"', 'SUBSYSTEMS=="pci"', 'DRIVERS=="ipu"', 'ATTRS{vendor}=="0x1d95"',
                 'ATTRS{device}=="0x0004"'):
        assert line in text, text


def test_pyudev_resolves_the_node_and_lists_by_subsystem(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["pyudev"]
    assert status == 0, text
    nodes = [f"ipu{i}{s}" for i in range(IPUS) for s in ("", "_ex", "_mailbox", "_mem")]
    assert text.splitlines() == [
        f"node ipu1_ex ipu /dev/ipu1_ex {240 << 8 | 5}",
        "parent 0000:1b:00.0 pci ipu 0x1d95",
        "class " + " ".join(nodes),
        "pci " + " ".join(f"0000:{a}" for a in ADDRESSES),
        "initialized True",
        "hwmon " + " ".join(f"hwmon{i}:0000:{a}:ipu" for i, a in enumerate(ADDRESSES)),
    ]


def test_sensors_reads_each_ipus_hwmon(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["sensors"]
    assert status == 0, text
    chips = re.findall(r"^(ipu-pci-[0-9a-f]{4})\nAdapter: PCI adapter\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    assert [chip for chip, _ in chips] == ["ipu-pci-1a00", "ipu-pci-1b00", "ipu-pci-1c00"], text
    for _, readings in chips:
        assert re.search(r"^temp1: +\+45\.0 ?°C", readings, re.M), readings
        assert re.search(r"^power1: +150\.00 W", readings, re.M), readings


def test_lsof_and_stat_see_character_devices_at_dev(tools: tuple[str, dict[str, tuple[int, str]]]) -> None:
    _, out = tools
    status, text = out["lsof"]
    assert status == 0, text
    assert re.search(r"^sleep +\d+ +\S+ +0r +CHR +240,8 +\S+ +\d+ /dev/ipu2$", text, re.M), text
    status, text = out["stat"]
    assert status == 0, text
    assert text.splitlines() == ["/dev/ipu0 character special file 0", "/dev/ipu0_ex character special file 0"]


def test_the_hosts_run_is_left_as_it_was() -> None:
    """In a mount namespace of the test's own whose /run holds a udev
    database entry of the host's and the run directory: `ipufs run` shows
    its own entry under that name, and afterwards the host's entry is as it
    was and the run directory empty."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    inner = "cat /run/udev/data/c240:0; ls /run/udev/data | tr '\\n' ' '; echo"
    script = ("mount -t tmpfs tmpfs /run && mkdir -p /run/udev/data /run/xdg && echo I:1 > /run/udev/data/c240:0 "
              "&& echo I:2 > /run/udev/data/c10:200 && touch /run/host-file "
              f"&& XDG_RUNTIME_DIR=/run/xdg {sys.executable} -m ipufs run --ipus 1 -- sh -c \"$0\" "
              "&& echo after && cat /run/udev/data/c240:0 && ls -A /run/xdg && echo end")
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, inner],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("I:") and lines[0] != "I:1"
    assert "E:ID_PATH=pci-0000:1a:00.0" in lines
    listing = lines[lines.index("V:1") + 1].split()
    assert {"c10:200", "c240:0", "c240:3", "+pci:0000:1a:00.0"} <= set(listing)
    assert lines[-3:] == ["after", "I:1", "end"]
