# The control socket's connection limit and deadlines, through a real
# mount: connections part-way through a line, connections that leave their
# answers unread and live traces that are not read all count against the
# limit and give way to a newcomer; a line trickled in byte by byte is
# closed by one deadline for the whole line; a trace that is not read is
# closed and stops costing the device; a reader that falls behind is told
# how many events it lost. Deadlines are set short; every wait is bounded.
from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from ipufs.abi.registers import REGISTERS
from ipufs.client import Control, ControlError, Device
from tests.integration.harness import RunningDaemon, wait_for

pytestmark = pytest.mark.mount

LIMIT = 64  # the daemon's connection limit (docs/control.md)
TRACES = 32  # of which live traces may take at most this many


def connect(board: RunningDaemon) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    deadline = time.monotonic() + 10
    while True:  # a Unix socket's connect says EAGAIN while the backlog is full
        try:
            s.connect(board.daemon.config.control_path)
            return s
        except BlockingIOError:
            if time.monotonic() > deadline:
                s.close()
                raise
            time.sleep(0.005)


def read_line(s: socket.socket) -> dict[str, Any]:
    line = s.makefile("rb").readline()
    assert line, "the daemon closed the connection without a word"
    message: dict[str, Any] = json.loads(line)
    return message


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    with ExitStack() as stack:
        stack.callback(lambda: [s.close() for s in sockets])
        yield sockets


def status_works(board: RunningDaemon) -> None:
    with Control.of_mount(board.mountpoint) as control:
        assert control.status()["ipus"][0]["ipu"] == 0


def test_connections_part_way_through_a_line_give_way_to_a_newcomer(board: RunningDaemon,
                                                                     held: list[socket.socket]) -> None:
    for _ in range(LIMIT):
        s = connect(board)
        s.sendall(b'{"op": "sta')  # and then nothing
        held.append(s)
    assert wait_for(lambda: board.daemon.control.connections == LIMIT, 10)
    status_works(board)
    assert read_line(held[0]) == {
        "ok": False, "error": f"part-way through a request the longest of {LIMIT} connections: connection closed"}
    assert held[0].recv(1) == b""


def test_a_line_trickled_byte_by_byte_is_closed_by_one_deadline(board: RunningDaemon) -> None:
    board.daemon.control.idle_timeout = 1.0
    board.daemon.control.line_timeout = 1.0
    with connect(board) as s:
        s.sendall(b"{")
        deadline = time.monotonic() + 8
        answer = b""
        while time.monotonic() < deadline and not answer.endswith(b"\n"):
            try:
                s.sendall(b" ")  # one byte every 0.25 s: never idle for 1 s
            except OSError:  # closed already: its answer waits to be read
                s.settimeout(2)
                while not answer.endswith(b"\n"):
                    more = s.recv(4096)
                    if not more:
                        break
                    answer += more
                break
            s.settimeout(0.25)
            try:
                answer += s.recv(4096)
            except TimeoutError:
                pass
        assert answer.endswith(b"\n"), "a line trickled in kept its connection open"
        assert json.loads(answer) == {"ok": False, "error": "request line unfinished after 1 s: connection closed"}
    status_works(board)


def unread_answers(s: socket.socket) -> None:
    """Ask until the daemon's answers fill the socket, reading none."""
    s.setblocking(False)
    try:
        for _ in range(100_000):
            s.send(b'{"op": "status"}\n' * 64)
    except BlockingIOError:
        pass


def test_connections_that_leave_their_answers_unread_give_way_to_a_newcomer(board: RunningDaemon,
                                                                            held: list[socket.socket]) -> None:
    board.daemon.control.line_timeout = 60.0
    board.daemon.control.served.send_grace = 0.1
    for _ in range(LIMIT):
        s = connect(board)
        unread_answers(s)
        held.append(s)
    assert wait_for(lambda: board.daemon.control.connections == LIMIT, 10)
    time.sleep(0.2)  # the send grace: a client that reads is never taken for a stalled one
    status_works(board)
    assert board.daemon.control.connections <= LIMIT


def pwrites(board: RunningDaemon, count: int) -> None:
    with Device(0, board.mountpoint) as dev:
        for i in range(count):
            os.pwrite(dev.fd, struct.pack("<I", i), REGISTERS["SCRATCH"].offset)


def stalled_traces(board: RunningDaemon, held: list[socket.socket], count: int) -> None:
    """``count`` live traces that are never read, and events until every
    one of them is behind."""
    tracer = board.daemon.tracer
    for _ in range(count):
        s = connect(board)
        s.sendall(b'{"op": "trace", "kinds": ["register-write"]}\n')
        assert read_line(s) == {"ok": True, "tracing": True}
        held.append(s)  # and never read again
    assert wait_for(lambda: len(tracer.subscribers) == count, 10)
    deadline = time.monotonic() + 20
    while not all(sub.dropped for sub in tracer.subscribers):
        assert time.monotonic() < deadline, "the traces never filled"
        pwrites(board, 2000)


def test_idle_traces_never_lock_other_clients_out(board: RunningDaemon, held: list[socket.socket]) -> None:
    """Traces of an idle daemon wait for events, not for their client, so
    none can be evicted: they may take only part of the slots."""
    answers = []
    for _ in range(LIMIT):
        s = connect(board)
        s.sendall(b'{"op": "trace"}\n')
        answers.append(read_line(s))
        held.append(s)
    assert answers[:TRACES] == [{"ok": True, "tracing": True}] * TRACES
    assert answers[TRACES:] == [{"ok": False, "error": f"too many live traces (at most {TRACES}): close one, "
                                                        "or try again later"}] * (LIMIT - TRACES)
    assert len(board.daemon.tracer.subscribers) == TRACES
    for _ in range(3):
        status_works(board)
    assert len(board.daemon.tracer.subscribers) == TRACES  # and the traces still follow


def test_traces_that_are_not_read_give_way_to_a_newcomer(board: RunningDaemon, held: list[socket.socket]) -> None:
    control = board.daemon.control
    control.max_traces = LIMIT  # every slot a stalled trace
    control.line_timeout = 60.0
    control.served.send_grace = 0.1
    stalled_traces(board, held, LIMIT)
    deadline = time.monotonic() + 60
    tries = 0
    while True:  # the traces still empty their buffers into the sockets for a while
        tries += 1
        try:
            status_works(board)  # one stalled trace gave its slot to this newcomer
            break
        except (ControlError, OSError) as exc:  # refused, said or not, or not answered in time on a busy machine
            assert "too many control connections" in str(exc) or isinstance(exc, OSError)
            assert time.monotonic() < deadline, "no stalled trace gave way"
            time.sleep(0.1)
    # A newcomer evicts at most one each (a try that timed out may have
    # taken its slot); the rest wait for their deadline.
    left = len(board.daemon.tracer.subscribers)
    assert wait_for(lambda: LIMIT - tries <= len(board.daemon.tracer.subscribers) <= LIMIT - 1, 10), left
    time.sleep(0.5)
    assert LIMIT - tries <= len(board.daemon.tracer.subscribers) <= LIMIT - 1


def test_traces_that_are_not_read_are_closed_and_stop_costing_the_device(board: RunningDaemon,
                                                                         held: list[socket.socket]) -> None:
    control = board.daemon.control
    control.line_timeout = 1.0
    tracer = board.daemon.tracer
    stalled_traces(board, held, 8)
    deadline = time.monotonic() + 20
    while tracer.subscribers:
        assert time.monotonic() < deadline, "stalled traces were never closed"
        pwrites(board, 200)
    assert not tracer.enabled  # the device no longer pays for them
    assert wait_for(lambda: control.connections == 0, 10)
    for s in held:  # what was sent before the deadline is there, then the end
        s.settimeout(10)
        while s.recv(1 << 16):
            pass
    status_works(board)


def test_a_reader_that_fell_behind_is_told_how_many_events_it_lost(board: RunningDaemon) -> None:
    board.daemon.control.line_timeout = 60.0
    tracer = board.daemon.tracer
    with connect(board) as s:
        s.sendall(b'{"op": "trace", "ipu": 0, "kinds": ["register-write"]}\n')
        lines = s.makefile("rb")
        assert json.loads(lines.readline()) == {"ok": True, "tracing": True}
        deadline = time.monotonic() + 20
        while not tracer.subscribers[0].dropped:  # not reading meanwhile
            assert time.monotonic() < deadline, "nothing was dropped"
            pwrites(board, 2000)
        pwrites(board, 1)  # the event after the loss carries the notice
        kinds = set()
        for line in lines:
            event = json.loads(line)
            kinds.add(event["kind"])
            if event["kind"] == "dropped":
                assert event["count"] > 0
                break
        assert kinds == {"register-write", "dropped"}


def test_a_plan_nested_30000_deep_is_refused_naming_the_key_with_no_traceback(
        board: RunningDaemon, caplog: pytest.LogCaptureFixture) -> None:
    text = '[[fault]]\nkind = "reset"\nat = ' + "[" * 30_000 + "]" * 30_000
    with connect(board) as s:
        s.sendall(json.dumps({"op": "plan", "toml": text}).encode() + b"\n")
        assert read_line(s) == {"ok": False, "error": "at nests more than 16 levels deep (at most 16)"}
    with connect(board) as s:
        s.sendall(b'{"op": "inject", "kind": "icu-message", "words": ' + b"[" * 30_000 + b"]" * 30_000 + b"}\n")
        assert read_line(s) == {"ok": False, "error": "words nests more than 16 levels deep (at most 16)"}
    assert not [r for r in caplog.records if r.exc_info]
    status_works(board)
