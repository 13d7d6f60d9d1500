# Loading tile code through a real mount: `Device.load_elf` and `ipufs
# load` write an assembled ELF's segments into chosen tiles' memory through
# the exchange BAR, the model sees them there, and a refused file writes
# nothing.
from __future__ import annotations

from pathlib import Path

import pytest

from ipufs import cli
from ipufs.abi import elf
from ipufs.client import Device, LoadError
from ipufs.model.profile import PROFILES, Region
from tests.integration.harness import RunningDaemon, python_client, running_daemon

pytestmark = pytest.mark.mount

SOURCE = """\
    .text 0x40000
_start:
    get $m0, $TILE_ID
    bri _start
    .data 0x60000
    .word 0xdeadbeef, 7
"""


@pytest.fixture(params=[True, False], ids=["passthrough", "page-cache"])
def ipu1(tmp_path: Path, request: pytest.FixtureRequest) -> object:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", passthrough=request.param) as d:
        yield d


def _assembled(tmp_path: Path, source: str = SOURCE) -> bytes:
    (tmp_path / "p.s").write_text(source)
    assert cli.main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.elf")]) == 0
    return (tmp_path / "p.elf").read_bytes()


def _tile_bytes(board: RunningDaemon, tile: int, address: int, size: int) -> bytes:
    ipu = board.daemon.devices.ipus[0]
    return board.call(lambda: ipu.tiles.read(tile, address, 4) if size == 4 else
                      ipu.memory[Region.EXCHANGE].read(ipu.tiles.window_start(tile) + address - 0x40000, size))


def test_segments_land_in_the_chosen_tiles_only(ipu1: RunningDaemon, tmp_path: Path) -> None:
    data = _assembled(tmp_path)
    # Another process's mapping, made before the load, sees the code too
    # (in a process of its own: a page fault here would wait on this
    # process's own daemon thread).
    watcher = python_client(ipu1.path("ipu0_ex"))
    try:
        tile5 = PROFILES["ipu1"].exchange_tile_base + 5 * 0x40000  # tile 5's window (docs/registers.md)
        assert watcher.load(tile5, 4) == bytes(4)
        with Device(0, ipu1.mountpoint) as device:
            assert device.load_elf(data, [0, 5, 1215]) == 8 + 8
        assert watcher.load(tile5, 4) == (0x41000003).to_bytes(4, "little")
    finally:
        watcher.close()
    for tile in (0, 5, 1215):
        assert _tile_bytes(ipu1, tile, 0x40000, 4) == (0x41000003).to_bytes(4, "little")
        assert _tile_bytes(ipu1, tile, 0x60000, 8) == (0xDEADBEEF).to_bytes(4, "little") + (7).to_bytes(4, "little")
    assert _tile_bytes(ipu1, 1, 0x40000, 4) == bytes(4)


def test_a_refused_file_writes_nothing(ipu1: RunningDaemon, tmp_path: Path) -> None:
    # Good code, then a data segment past populated memory: nothing at all is written.
    data = _assembled(tmp_path, SOURCE.replace(".data 0x60000", ".data 0x7fffc"))
    with Device(0, ipu1.mountpoint) as device:
        with pytest.raises(LoadError, match="outside populated tile memory"):
            device.load_elf(data, [0, 1])
    assert _tile_bytes(ipu1, 0, 0x40000, 4) == bytes(4)
    code_in_region_1 = elf.write_elf("ipu1", 0x60000, [elf.Section(".text", 0x60000, bytes(4), 6)], [])
    with Device(0, ipu1.mountpoint) as device:
        with pytest.raises(LoadError, match="region 0"):
            device.load_elf(code_in_region_1)


def test_ipufs_load(ipu1: RunningDaemon, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _assembled(tmp_path)
    capsys.readouterr()
    argv = ["load", str(tmp_path / "p.elf"), "--dev", str(ipu1.mountpoint), "--ipu", "0", "--tiles", "0-3,7"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == "loaded 16 bytes into each of 5 tiles of ipu0\n"
    assert _tile_bytes(ipu1, 7, 0x40000, 4) == (0x41000003).to_bytes(4, "little")
    assert cli.main(["load", str(tmp_path / "p.elf"), "--dev", str(ipu1.mountpoint), "--tiles", "1216"]) == 1
    assert "tile 1216 does not exist" in capsys.readouterr().err


@pytest.fixture(scope="module")
def c_elf_load(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/c/elf_load.c: ipu.h's ipufs_load_elf, built as a tool writer would."""
    from tests.integration.harness import ROOT, compile_c

    return compile_c(ROOT / "tests" / "c" / "elf_load.c", tmp_path_factory.mktemp("elf-load"))


def test_the_c_header_loads_the_same_way(ipu1: RunningDaemon, tmp_path: Path, c_elf_load: Path) -> None:
    import errno
    import subprocess

    def load(path: Path, *tiles: int) -> int:
        out = subprocess.run([str(c_elf_load), str(ipu1.mountpoint), "0", str(path), *map(str, tiles)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return int(out.split()[1])

    _assembled(tmp_path)
    assert load(tmp_path / "p.elf", 2, 9) == 0
    assert _tile_bytes(ipu1, 9, 0x40000, 4) == (0x41000003).to_bytes(4, "little")
    assert _tile_bytes(ipu1, 9, 0x60004, 4) == (7).to_bytes(4, "little")
    assert _tile_bytes(ipu1, 3, 0x40000, 4) == bytes(4)
    assert load(tmp_path / "p.elf", 1216) == -errno.ERANGE
    _assembled(tmp_path, SOURCE.replace(".data 0x60000", ".data 0x7fffc"))
    assert load(tmp_path / "p.elf", 4) == -errno.EFAULT
    assert _tile_bytes(ipu1, 4, 0x40000, 4) == bytes(4)  # nothing written
    (tmp_path / "r1.elf").write_bytes(elf.write_elf("ipu1", 0, [elf.Section(".text", 0x60000, bytes(4), 6)], []))
    assert load(tmp_path / "r1.elf", 4) == -errno.EINVAL
    (tmp_path / "ipu2.elf").write_bytes(elf.write_elf("ipu2", 0, [elf.Section(".text", 0x40000, bytes(4), 6)], []))
    assert load(tmp_path / "ipu2.elf", 4) == -errno.EXDEV
    (tmp_path / "junk.elf").write_bytes(b"not an elf at all, but long enough to be read as a header" * 2)
    assert load(tmp_path / "junk.elf", 4) == -errno.ENOEXEC
