# The sysfs view through a real mount: one PCI device directory per IPU,
# named as `ipufs ls` names it, whose attributes agree with `ipufs info` and
# follow the model live (reset, exceptions, telemetry, the link).
from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.client import Device
from ipufs.abi.pci import pci_address
from ipufs.driver import sysfs
from ipufs.abi.registers import ExceptionCause
from tests.integration.harness import RunningDaemon, ipufs_command, running_daemon

pytestmark = pytest.mark.mount


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with running_daemon(tmp_path_factory.mktemp("sysfs") / "mnt", ipus=4, profile="ipu2") as d:
        yield d


def view(d: RunningDaemon) -> Path:
    return d.mountpoint / "sys" / "bus" / "pci" / "devices"


def attribute(d: RunningDaemon, index: int, name: str) -> str:
    return (view(d) / pci_address(index) / name).read_text()


def ipufs(*args: str) -> str:
    out = subprocess.run(ipufs_command(*args), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_one_directory_per_ipu_named_as_ipufs_ls_names_it(board: RunningDaemon) -> None:
    listed = json.loads(ipufs("ls", "--json", "--dev", str(board.mountpoint)))["devices"]
    addresses = [d["pci_domain"] for d in listed if d["type"] == "PCIe"]
    names = sorted(os.listdir(view(board)))
    assert names == addresses == ["0000:1a:00.0", "0000:1b:00.0", "0000:1c:00.0", "0000:1d:00.0"]
    # What aspen-sdk does: read file_name in every entry and parse all of it.
    assert sorted(int((view(board) / n / "file_name").read_text()) for n in names) == [0, 1, 2, 3]


def test_kernel_and_driver_attributes(board: RunningDaemon) -> None:
    a = {name: attribute(board, 2, name) for name in sysfs.ATTRIBUTES}
    assert a["vendor"] == "0x1d95\n" and a["device"] == "0x0004\n" and a["subsystem_vendor"] == "0x1d95\n"
    assert a["class"] == "0x120000\n" and a["numa_node"] == "0\n"
    assert a["current_link_speed"] == a["max_link_speed"] == "16.0 GT/s PCIe\n"
    assert a["current_link_width"] == a["max_link_width"] == "16\n"
    assert a["file_name"] == "2" and a["board_name"] == "M2000\n" and a["parity_init_flag"] == "1\n"
    assert a["firmware_version_int"] == f"{2 << 16 | 5 << 8 | 9}\n"
    resource = [tuple(int(x, 16) for x in line.split()) for line in a["resource"].splitlines()]
    assert len(resource) == 7
    # Four memory BARs, each a power of two that holds its node (and, for
    # BARs 4 and 5, the MSI-X table and PBA past it), aligned to its size.
    sizes = {bar: end - start + 1 for bar, (start, end, flags) in enumerate(resource) if flags}
    nodes = {0: "ipu2", 2: "ipu2_ex", 4: "ipu2_mailbox", 5: "ipu2_mem"}
    assert set(sizes) == set(nodes)
    for bar, node in nodes.items():
        assert sizes[bar] & (sizes[bar] - 1) == 0 and sizes[bar] >= os.stat(board.path(node)).st_size
        assert os.stat(view(board) / pci_address(2) / f"resource{bar}").st_size == sizes[bar]
    assert all(start % (end - start + 1) == 0 for start, end, flags in resource if flags)
    start, end = (int(x, 16) for x in a["continuous_memory_nodes"].strip().split("-"))
    assert start == resource[5][0] and end - start + 1 == os.stat(board.path("ipu2_mem")).st_size
    # The bus lists links into the devices tree; the driver link resolves
    # to the driver's directory, which lists the bound devices.
    entry = view(board) / pci_address(2)
    assert os.readlink(entry) == "../../../devices/pci0000:1c/0000:1c:00.0"
    driver = (entry / "driver").resolve()
    assert driver == board.mountpoint / "sys/bus/pci/drivers/ipu"
    assert sorted(os.listdir(driver)) == [pci_address(i) for i in range(4)]
    assert (driver / pci_address(2)).resolve() == entry.resolve()
    assert a["uevent"].startswith("DRIVER=ipu\nPCI_CLASS=120000\nPCI_ID=1D95:0004\n")
    assert a["modalias"] == "pci:v00001D95d00000004sv00001D95sd00000002bc12sc00i00\n"
    assert a["irq"] == "34\n" and a["enable"] == "1\n" and a["revision"] == "0x01\n"


def test_attributes_agree_with_ipufs_info(board: RunningDaemon) -> None:
    info = json.loads(ipufs("info", "--json", "--dev", str(board.mountpoint)))
    for fields in info:
        index = int(fields["id"])
        assert fields["pci_id"] == pci_address(index) and fields["sysfs_file_id"] == index
        assert attribute(board, index, "file_name") == str(fields["sysfs_file_id"])
        assert attribute(board, index, "serial") == fields["board_serial_number"] + "\n"
        assert attribute(board, index, "board_name") == fields["board_type"] + "\n"
        assert attribute(board, index, "board_variant_name") == fields["board_variant"] + "\n"
        assert attribute(board, index, "firmware_version") == fields["firmware_version"] + "\n"
        assert attribute(board, index, "bootloader_version") == fields["icu_bootloader_version"] + "\n"
        assert attribute(board, index, "numa_node") == f"{fields['numa_node']}\n"
        assert attribute(board, index, "current_link_width") == f"{fields['link_width']}\n"
        assert attribute(board, index, "current_link_speed") == f"{fields['link_speed_gt/s']:.1f} GT/s PCIe\n"
        assert attribute(board, index, "parity_init_flag") == f"{fields['parity_initialised']}\n"
        assert attribute(board, index, "ipu_error_state") == fields["ipu_error_state"] + "\n"
        with Device(index, board.mountpoint) as dev:
            assert attribute(board, index, "reset_count") == f"{dev.read_register('RESET_COUNT')}\n"


def test_values_are_live(board: RunningDaemon) -> None:
    model = board.daemon.devices.ipus[1]
    hwmon = view(board) / pci_address(1) / "hwmon" / "hwmon1"
    before = int(attribute(board, 1, "reset_count"))
    with Device(1, board.mountpoint) as dev:
        dev.reset()
    assert int(attribute(board, 1, "reset_count")) == before + 1
    board.call(lambda: model.raise_exception(ExceptionCause.PARITY, 3, 0x40000))
    assert attribute(board, 1, "ipu_error_state") == "parity\n"
    with Device(1, board.mountpoint) as dev:
        dev.reset()
    assert attribute(board, 1, "ipu_error_state") == "no errors\n"
    board.call(lambda: model.set_telemetry(temperature_mc=71_500, power_mw=120_000, clock_mhz=1200))
    assert (hwmon / "temp1_input").read_text() == "71500\n"
    assert (hwmon / "power1_input").read_text() == "120000000\n"
    assert (hwmon / "freq1_input").read_text() == "1200000000\n"
    board.call(lambda: model.set_link(False))
    try:
        assert attribute(board, 1, "current_link_speed") == "Unknown\n"
        assert attribute(board, 1, "current_link_width") == "0\n"
        assert attribute(board, 1, "max_link_width") == "16\n"
    finally:
        board.call(lambda: model.set_link(True))
        with Device(1, board.mountpoint) as dev:
            dev.reset()


def test_the_view_is_read_only_and_looks_like_sysfs(board: RunningDaemon) -> None:
    path = view(board) / pci_address(0) / "vendor"
    st = os.stat(path)
    assert oct(st.st_mode) == oct(0o100444) and st.st_size == sysfs.ATTRIBUTE_SIZE and st.st_uid == 0
    for flags in (os.O_WRONLY, os.O_RDWR):
        with pytest.raises(PermissionError):
            os.open(path, flags)
    with pytest.raises(PermissionError):
        os.chmod(path, 0o644)
    with pytest.raises(OSError) as exc:
        os.mkdir(view(board) / "new")
    assert exc.value.errno == errno.EPERM
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.pread(fd, 3, 2) == b"1d9"  # offsets work, and each read is fresh
        import fcntl

        with pytest.raises(OSError) as exc:
            fcntl.ioctl(fd, 0xED0A)
        assert exc.value.errno == errno.ENOTTY
    finally:
        os.close(fd)
