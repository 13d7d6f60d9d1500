# docs/filesystem.md's error table follows from the code: each row with an
# errno is one request sent through the fake kernel, answered with that
# errno; the table of requests left to the kernel is generated from the
# operations contract (ipufs/fuse/operations.py).
from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator

import pytest

from ipufs.driver.devices import DeviceSet
from ipufs.fuse import abi
from ipufs.fuse import requests as rq
from ipufs.fuse.operations import ENOSYS_MEANS, Operations
from ipufs.model.profile import PROFILES
from scripts import generate_abi
from tests.driver.rig import Rig
from tests.fuse import fakekernel as fk

C = rq.Context(0, 0, 1)
CONFIG_INO = 2  # ipu0


@pytest.fixture
def rig() -> Iterator[Rig]:
    devices = DeviceSet(PROFILES["ipu1"], 1)
    yield Rig(devices)
    devices.close()


def _send(rig: Rig, request: rq.Request) -> int:
    frame = rig.kernel.session.dispatch(request)
    assert frame is not None
    return fk.decode_reply(frame).error


def _opened(rig: Rig) -> int:
    reply = rig.kernel.call(rq.Open, CONFIG_INO, os.O_RDWR)
    assert reply.error == 0
    return int.from_bytes(reply.payload[:8], "little")


#: The first cell of a row of the table -> the request that row describes.
CASES: dict[str, Callable[[Rig], rq.Request]] = {
    "open a name that is not a node": lambda r: rq.Lookup(5, 1, C, b"ipu9"),
    "create, mknod, mkdir, unlink, rmdir, rename, link, symlink": lambda r: rq.Mkdir(5, 1, C, b"d", 0o755, 0),
    "truncate, `O_TRUNC`, setattr of another size": lambda r: rq.Setattr(
        5, CONFIG_INO, C, int(abi.SetattrValid.SIZE), 0, 1, 0, 0, 0, 0, 0, 0),
    "`write` starting at or past the end of a node": lambda r: rq.Write(
        5, CONFIG_INO, C, _opened(r), PROFILES["ipu1"].config_size, memoryview(b"x"), 0, 0),
    "fallocate": lambda r: rq.Fallocate(5, CONFIG_INO, C, _opened(r), 0, 4096, 0),
    "setxattr, removexattr": lambda r: rq.Setxattr(5, 1, C, b"user.ipufs.mode", b"x", 0),
    "getxattr of an unknown name": lambda r: rq.Getxattr(5, 1, C, b"user.nothing", 100),
    "readlink": lambda r: rq.Readlink(5, CONFIG_INO, C),
    "ioctl": lambda r: rq.Ioctl(5, CONFIG_INO, C, _opened(r), 0, 0x5401, 0, memoryview(b""), 0),
    "a request ipufs does not serve (the table below, and any opcode it does not know, such as STATX)":
        lambda r: rq.Unsupported(5, 1, C, 52),
}


def _rows() -> list[tuple[str, str]]:
    text = generate_abi.FILESYSTEM_DOC.read_text()
    table = text.split("## Errors", 1)[1].split("| what | errno |\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines()[1:]]
    assert len(rows) > 10, "the error table of docs/filesystem.md is missing"
    return [(what.removeprefix("| "), answer.removesuffix(" |")) for what, answer in rows]


def _errno_of(answer: str) -> int | None:
    """The errno a row's answer starts with (the ioctl row names ENOTTY)."""
    names = re.findall(r"\b(E[A-Z]+)\b", answer)
    return getattr(errno, names[0]) if names else None


def test_every_row_with_an_errno_has_a_case() -> None:
    rows = {what for what, answer in _rows() if _errno_of(answer) is not None}
    unchecked = rows - set(CASES) - {"any request that makes a handler fail unexpectedly",
                                     "a malformed message from the kernel",
                                     "close"}  # test_no_close_waits_on_the_daemon
    assert not unchecked, f"add a case for {unchecked}"


@pytest.mark.parametrize("what,answer", [r for r in _rows() if r[0] in CASES], ids=lambda v: v[:30])
def test_the_documented_errno_is_the_answer(rig: Rig, what: str, answer: str) -> None:
    assert _send(rig, CASES[what](rig)) == _errno_of(answer)


def test_the_table_of_requests_left_to_the_kernel_is_generated() -> None:
    text = generate_abi.FILESYSTEM_DOC.read_text()
    assert generate_abi.render_unserved_table() in text, "run: ./dev generate"


@pytest.mark.parametrize("request_type", sorted(ENOSYS_MEANS, key=lambda t: t.__name__), ids=lambda t: t.__name__)
def test_enosys_is_documented_only_for_requests_the_contract_has(request_type: type[rq.Request]) -> None:
    assert request_type.operation is not None and callable(getattr(Operations, request_type.operation))


def test_every_request_left_to_the_kernel_answers_enosys(rig: Rig) -> None:
    fh = _opened(rig)
    requests = {
        "flush": rq.Flush(5, CONFIG_INO, C, fh, 0),
        "bmap": rq.Bmap(5, CONFIG_INO, C, 0, 512),
        "copy_file_range": rq.CopyFileRange(5, CONFIG_INO, C, fh, 0, CONFIG_INO, fh, 0, 4, 0),
        "lock": rq.Lock(5, CONFIG_INO, C, abi.Opcode.GETLK, fh, 0, 0, 0, 0, 0, 0),
    }
    table = generate_abi.render_unserved_table()
    assert {line.split(" | ")[0].removeprefix("| ").lower() for line in table.splitlines()[2:]} == set(requests)
    for name, request in requests.items():
        assert _send(rig, request) == errno.ENOSYS, name


def test_no_close_waits_on_the_daemon(rig: Rig) -> None:
    for nodeid in range(2, 2 + len(rig.fs.tree)):
        reply = rig.kernel.call(rq.Open, nodeid, os.O_RDWR)
        flags = int.from_bytes(reply.payload[8:12], "little")
        assert flags & abi.OpenFlag.NOFLUSH, nodeid


def test_a_name_longer_than_name_max_is_enametoolong(rig: Rig) -> None:
    assert _send(rig, rq.Lookup(5, 1, C, b"i" * 256)) == errno.ENAMETOOLONG
