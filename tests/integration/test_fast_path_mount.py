# The fast path through a real mount: the same stream of ioctls (the two
# fast ones in every direction and a range of sizes, with responses waiting
# and not) gets the same answers, result and bytes, from a daemon with the
# fast path (its reader spinning, or only ever asleep in a blocking read)
# as from one without; and the fast path did answer some of them.
from __future__ import annotations

import fcntl
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipufs.abi import ioctls as abi
from ipufs.abi.icu import MESSAGE, Op, op_word
from ipufs.daemon.faults import limits_of
from ipufs.daemon.plan import FaultPlan
from ipufs.driver.mapping import PASSTHROUGH
from ipufs.run import services
from tests.integration.harness import running_daemon

pytestmark = [pytest.mark.mount, pytest.mark.uring]

READ_ONLY = abi.BY_NAME["MAILBOX_READ_ONLY"].nr
OFFSETS = abi.BY_NAME["MAILBOX_GET_OFFSETS"].nr
WRITE_ONLY = abi.BY_NAME["MAILBOX_WRITE_ONLY"].cmd


def commands() -> Iterator[int]:
    for nr, direction, size in itertools.product((READ_ONLY, OFFSETS), (abi.Dir.READ, abi.Dir.READ_WRITE),
                                                 (4, 8, 12, 16, 20, 24)):
        yield abi.ioc(direction, nr, size)


def ask(fd: int, cmd: int) -> tuple[int | str, bytes]:
    """What an ioctl answers: (its result, the argument after) or (the errno's name, b"")."""
    size = abi.ioc_fields(cmd)[3]
    buffer = bytearray(b"\xa5" * size)
    try:
        result = fcntl.ioctl(fd, cmd, buffer, True)
    except OSError as exc:
        return os.strerror(exc.errno or 0), b""
    return result, bytes(buffer)


def stream(mailbox: str) -> list[tuple[int, int | str, bytes]]:
    fd = os.open(mailbox, os.O_RDWR)
    try:
        answers = []
        for waiting in (0, 3, 0):
            for _ in range(waiting):
                fcntl.ioctl(fd, WRITE_ONLY, MESSAGE.pack(op_word(Op.READ_FIRMWARE_VERSION), 0, 0, 0, 0))
            answers += [(cmd, *ask(fd, cmd)) for cmd in commands()]
        return answers
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def without_fast_path(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, int | str, bytes]]:
    with running_daemon(tmp_path_factory.mktemp("slow") / "mnt", ipus=1, profile="ipu1", fast_path=False) as d:
        assert d.daemon.fast is None
        assert os.getxattr(d.mountpoint, "user.ipufs.fast_path") == b"off"
        return stream(d.path("ipu0_mailbox"))


@pytest.mark.parametrize("spin_us", [50, 0], ids=["spinning", "asleep"])
def test_the_fast_path_answers_as_python_does(tmp_path: Path, spin_us: int,
                                              without_fast_path: list[tuple[int, int | str, bytes]]) -> None:
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", spin_us=spin_us) as d:
        answers = stream(d.path("ipu0_mailbox"))
        fast = d.daemon.fast
        assert fast is not None
        answered = fast.answered
        mode = d.daemon.filesystem.mode
        # What `ipufs doctor` shows of the mount.
        shown = {m.mountpoint: m.fast_path for m in services.mount_status()}[str(d.mountpoint)]
    assert shown == ("on" if mode == PASSTHROUGH else "held: page-cache mode")
    assert answers == without_fast_path
    assert {a[1] for a in answers} >= {0, os.strerror(11), os.strerror(22)}  # counts, EAGAIN, EINVAL
    if mode == PASSTHROUGH:
        assert answered > 10
    else:  # page-cache mode: held, every request Python's
        assert answered == 0


@pytest.mark.parametrize("what", ["trace", "fault plan"])
def test_a_trace_or_a_fault_plan_started_while_files_are_open_holds_the_fast_path(tmp_path: Path,
                                                                                   what: str) -> None:
    """While the Python path must see every request (an event per ioctl,
    an access count per request), the daemon's fast path answers none."""
    count = abi.ioc(abi.Dir.READ, READ_ONLY, 8)
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1") as d:
        fast = d.daemon.fast
        assert fast is not None and d.daemon.filesystem.mode == PASSTHROUGH
        fd = os.open(d.path("ipu0_mailbox"), os.O_RDWR)
        try:
            ask(fd, count)
            before = fast.answered
            assert before >= 1
            if what == "trace":
                d.call(lambda: d.daemon.tracer.open_file(str(tmp_path / "trace.jsonl"), 1 << 20))
            else:
                plan = FaultPlan.parse('[[fault]]\nkind = "reset"\nipu = 0\nafter = 1000000\n',
                                       limits_of(d.daemon.devices))
                d.call(lambda: d.daemon.plans.start(plan))
            shown = os.getxattr(d.mountpoint, "user.ipufs.fast_path").decode()
            answers = [ask(fd, count) for _ in range(20)]
            after = fast.answered
        finally:
            os.close(fd)
    assert shown == ("held: a trace listens" if what == "trace" else "held: a fault plan counts accesses")
    assert after == before and answers == [(0, bytes(8))] * 20
