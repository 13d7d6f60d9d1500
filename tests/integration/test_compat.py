# An unmodified client of the real driver (tests/c/real_client.c, written
# from the public facts alone) against emulated IPUs: under `ipufs run` with
# the compatibility library, as root and as an unprivileged user; and what
# it gets on a plain mount without the library (docs/abi.md). Then what the
# library does and leaves alone, call by call.
from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs import compat
from ipufs.client import Control
from ipufs.driver import sysfs
from ipufs.abi.icu import Op
from ipufs.model.profile import PROFILES
from tests.integration.compat_harness import Run, build, public_dir
from tests.integration.harness import running_daemon

pytestmark = pytest.mark.mount

IPU2 = PROFILES["ipu2"]  # the default profile: the sizes the client maps
SOURCES = ("gs1_e0", "exception", "icu_doorbell", "gs2_e1", "gs1_e1", "gs2_e0")


@pytest.fixture(scope="module")
def programs() -> Iterator[dict[str, Path]]:
    with public_dir() as out:
        yield {name: build(f"{name}.c", out) for name in ("real_client", "stat_probe")}


def drive_real_client(run: Run) -> None:
    """The real client's whole session: discovery, character devices, maps,
    ATTACH(NULL), SET_IPU_ID(arg), the _IOW mailbox, RESET by value, and a
    signal of each kind with its si_int (injected through IPUFS_CONTROL)."""
    try:
        control = run.line()
        lines = run.until("ready")
        assert lines[0] == "found 4: 0 1 2 3", lines
        for n in range(4):
            assert f"ipu{n} chr 240:{4 * n} size 0 mapped {IPU2.config_size} {IPU2.exchange_size}" in lines, lines
            assert f"attached ipu{n} id {100 + n}" in lines, lines
        # ReadFirmwareVersion: version 2.5.9 (major | minor << 16, revision).
        assert f"mailbox 0x{Op.READ_FIRMWARE_VERSION << 16 | 0x20c:08x} 0x00050002 0x00000009 0x00000000 0x00000000" in lines
        assert "reset ipu1" in lines
        with Control(control) as c:
            for ipu, source in enumerate(SOURCES):
                c.inject("interrupt", ipu % 4, source=source)
        got = [run.line() for _ in SOURCES]
        signals = {source: 44 + i for i, source in enumerate(
            ("exception", "icu_doorbell", "gs1_e0", "gs1_e1", "gs2_e0", "gs2_e1"))}
        assert sorted(got) == sorted(f"signal {signals[s]} si_int {100 + i % 4} si_code -1"
                                     for i, s in enumerate(SOURCES))
        status, err = run.finish()
        assert status == 0, err
    finally:
        run.close()


def test_the_real_client_works_under_ipufs_run(programs: dict[str, Path]) -> None:
    drive_real_client(Run(["--ipus", "4"], ["sh", "-c", 'echo "$IPUFS_CONTROL"; exec "$0" "$@"',
                                            str(programs["real_client"]), "--mailbox", str(int(Op.READ_FIRMWARE_VERSION)),
                                            "--reset", "1", "--signals", str(len(SOURCES))]))


def host_fuse() -> int:
    """The host's /dev/fuse's mode."""
    return os.stat("/dev/fuse").st_mode


def test_the_real_client_works_for_an_unprivileged_user(programs: dict[str, Path]) -> None:
    before = host_fuse()
    run = Run(["--ipus", "4"], ["sh", "-c", 'echo "$IPUFS_CONTROL"; exec "$0" "$@"',
                                str(programs["real_client"]), "--mailbox", str(int(Op.READ_FIRMWARE_VERSION)),
                                "--reset", "1", "--signals", str(len(SOURCES))], user=True)
    drive_real_client(run)
    assert host_fuse() == before


def test_the_unprivileged_run_never_touches_the_hosts_dev_fuse() -> None:
    """Its /dev/fuse is open to users inside its namespace alone, by a node
    of its own: the host's keeps its mode while the run lasts and after it
    is killed, so runs at once cannot race on it."""
    before = host_fuse()
    run = Run(["--ipus", "1"], ["sh", "-c", "stat -c '%a %i' /dev/fuse; id -u; exec sleep 60"], user=True)
    try:
        mode, ino = run.line().split()
        assert (mode, run.line()) == ("666", "65534")
        assert int(ino) != os.stat("/dev/fuse").st_ino  # a node of its own, whatever the host's mode
        assert host_fuse() == before  # while it runs
    finally:
        run.close()  # killed: nothing of it stays on the host
    assert host_fuse() == before


def test_without_the_library_the_real_client_gets_the_documented_errors(programs: dict[str, Path]) -> None:
    run = Run(["--ipus", "1"], ["env", "-u", "LD_PRELOAD", str(programs["real_client"]),
                                "--mailbox", str(int(Op.READ_FIRMWARE_VERSION)), "--reset", "0", "--keep-going", "1"])
    lines = run.until("ready")
    status, err = run.finish()
    assert status == 0, err
    assert lines == [
        "found 1: 0",
        "error stat: /dev/ipu0 is not a character device",  # FUSE files are regular files
        f"ipu0 chr 0:0 size {IPU2.config_size} mapped {IPU2.config_size} {IPU2.exchange_size}",
        "error ATTACH: Bad address",  # _IOWR(0xED, 10, u64) with NULL: the kernel copies from NULL
        "mailbox 0x0004020c 0x00050002 0x00000009 0x00000000 0x00000000",  # the daemon answers in the buffer
        "error RESET: Bad address",  # _IOW(0xED, 45, int) with the value 0: again a pointer to the kernel
        "ready",
    ]


def test_on_a_plain_mount_the_real_client_finds_no_ipu(tmp_path: Path, programs: dict[str, Path]) -> None:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1"):
        out = subprocess.run([str(programs["real_client"])], capture_output=True, text=True, timeout=30).stdout
    # The host's PCI devices have no file_name (aspen-sdk's listing fails
    # on the first), or there are none.
    assert out.startswith("error file_name of ") or out.startswith("found 0:"), out


def test_stat_calls_report_character_devices_with_the_daemons_rdev(programs: dict[str, Path]) -> None:
    run = Run(["--ipus", "2", "--profile", "ipu1"],
              ["sh", "-c", 'for n in ipu1 ipu1_mailbox; do "$0" /dev/$n; getfattr --only-values -n user.ipufs.rdev '
                           '"$IPUFS_MOUNT/$n" 2>/dev/null || python3 -c "import os,sys; '
                           'print(os.getxattr(sys.argv[1], \'user.ipufs.rdev\').decode())" "$IPUFS_MOUNT/$n"; '
                           'echo; done; "$0" "$IPUFS_MOUNT/sys/bus/pci/devices/0000:1b:00.0/vendor"; echo end',
               str(programs["stat_probe"])])
    lines = [line for line in run.until("end") if line]
    status, err = run.finish()
    assert status == 0, err
    calls = ("stat", "lstat", "fstatat", "fstat", "statx")
    assert lines[:6] == [*(f"{c} chr 240:4 0 0660" for c in calls), "240:4"]  # size 0, as a real one
    assert lines[6:12] == [*(f"{c} chr 240:6 0 0660" for c in calls), "240:6"]
    # The view's files stay what they are.
    assert lines[12:17] == [f"{c} reg 0:0 {sysfs.ATTRIBUTE_SIZE} 0444" for c in calls]


def test_the_library_leaves_other_files_alone(tmp_path: Path, programs: dict[str, Path]) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(b"x" * 10)
    env = compat.preload(dict(os.environ))
    probe = [str(programs["stat_probe"]), str(plain)]
    assert subprocess.run(probe, env=env, capture_output=True, text=True).stdout == \
        subprocess.run(probe, capture_output=True, text=True).stdout
    # An ipufs ioctl number on a file of another filesystem takes the plain
    # path: the library does not rewrite it (the file system says ENOTTY).
    script = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
              "try:\n    fcntl.ioctl(fd, 0xC008ED0A, 0)\nexcept OSError as e:\n    print(e.errno)\n")
    for environment in (env, dict(os.environ)):
        out = subprocess.run([sys.executable, "-c", script, str(plain)], env=environment, capture_output=True,
                             text=True)
        assert out.stdout.strip() == str(errno.EFAULT) or out.stdout.strip() == str(errno.ENOTTY), out.stderr


def test_the_library_shows_the_view_at_sys_bus_pci_devices(tmp_path: Path) -> None:
    """Without a namespace (IPUFS_SYSFS names the view): listing, reading,
    stat, readlink and realpath of /sys/bus/pci/devices reach the view."""
    with running_daemon(tmp_path / "mnt", ipus=2, profile="ipu1") as d:
        view = compat.sysfs_view(d.mountpoint)
        env = {**compat.preload(dict(os.environ)), compat.SYSFS_ENV: str(view)}
        script = (
            "import os\nbase = '/sys/bus/pci/devices'\n"
            "names = sorted(os.listdir(base))\nprint(names)\n"
            "print([open(f'{base}/{n}/file_name').read() for n in names])\n"
            "print(os.path.isdir(base + '/' + names[0]), os.readlink(base + '/' + names[0] + '/driver'))\n"
            "print(os.path.realpath(base + '/' + names[1] + '/hwmon'))\n"
        )
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout.splitlines() == [
        "['0000:1a:00.0', '0000:1b:00.0']", "['0', '1']", "True ../../../bus/pci/drivers/ipu",
        # The entry is a link into the devices tree, as in sysfs; paths
        # there are not redirected (docs/compat.md).
        "/sys/devices/pci0000:1b/0000:1b:00.0/hwmon"], out.stderr


def test_python_clients_work_unchanged_under_the_library() -> None:
    script = ("import os\nfrom ipufs.client import Device, SignalReceiver\n"
              "with SignalReceiver() as signals, Device(1, '/dev') as dev:\n"
              "    dev.attach(); dev.set_ipu_id(9)\n"
              "    print(dev.icu_transfer((0x4020c, 0, 0, 0, 0))[1:3])\n"
              "    dev.mask(1); print(dev.unmask(1)); dev.reset()\n"
              "    from ipufs.client import Control\n"
              "    with Control(os.environ['IPUFS_CONTROL']) as c: c.inject('interrupt', 1, source='gs2_e0')\n"
              "    print([(s.signo, s.value) for s in signals.wait_for(1, 5.0)])\n")
    run = Run(["--ipus", "2"], [sys.executable, "-c", script])
    lines = [run.line() for _ in range(3)]
    status, err = run.finish()
    assert status == 0, err
    assert lines == [f"({0x50002}, 9)", "0", "[(48, 9)]"]  # firmware 2.5.9; mask; GS2_E0
