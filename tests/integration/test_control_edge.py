# The control socket's edge, through a real mount: whatever a test author
# sends (NaN, infinities, negatives, numbers that do not fit a register,
# wrong types, typos, over-long lines, a thousand idle connections) is
# answered, the daemon keeps serving, and the device's clients never see
# EIO because of it. A hypothesis property throws arbitrary JSON values at
# every operation and every plan key.
from __future__ import annotations

import errno
import json
import math
import os
import resource
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipufs.abi.icu import Op, op_word
from ipufs.abi.registers import REGISTERS
from ipufs.client import Control, Device, IoctlError
from ipufs.daemon.fault_kinds import KINDS
from ipufs.daemon.plan import PLAN_KEYS
from tests.integration.harness import PyClient, RunningDaemon, ipufs_command, stop_processes, wait_for

pytestmark = pytest.mark.mount


def ask(board: RunningDaemon, line: bytes) -> dict[str, Any]:
    """One raw request line on a fresh connection; the answer."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(board.daemon.config.control_path)
        s.sendall(line + b"\n")
        answer = s.makefile("rb").readline()
    assert answer, "the daemon closed the connection without an answer"
    message: dict[str, Any] = json.loads(answer)
    return message


def request(board: RunningDaemon, **fields: Any) -> dict[str, Any]:
    return ask(board, json.dumps(fields).encode())  # NaN and Infinity as Python writes them


def device_answers(board: RunningDaemon, ipu: int) -> None:
    """Requests a client makes of the daemon: none may fail with EIO."""
    with Device(ipu, board.mountpoint) as dev:
        assert os.pwrite(dev.fd, struct.pack("<I", 0xBEEF), REGISTERS["SCRATCH"].offset) == 4
        assert len(os.pread(dev.fd, 0x200, 0)) == 0x200
        assert os.pwrite(dev.fd, struct.pack("<I", 4), REGISTERS["CMD_SYNC"].offset) == 4
        try:
            dev.icu_transfer((op_word(Op.READ_CLOCK), 0, 0, 0, 0))
        except IoctlError as exc:
            assert exc.errno == errno.ETIMEDOUT  # an icu-timeout fault in force: documented
        try:
            dev.reset()
        except IoctlError as exc:
            assert exc.errno != errno.EIO


def alive(board: RunningDaemon) -> None:
    assert request(board, op="status")["ok"]
    for ipu in range(4):
        device_answers(board, ipu)


def test_a_nan_duration_is_refused_and_the_daemon_keeps_serving(board: RunningDaemon) -> None:
    for value in (math.nan, math.inf, -1, True, "2s"):
        answer = request(board, op="inject", kind="icu-timeout", ipu=0, **{"for": value})
        assert answer == {"ok": False, "error": f"for must be seconds 0..86400, got {value!r}"}
    answer = ask(board, b'{"op":"plan","toml":"[[fault]]\\nkind = \\"reset\\"\\nat = nan"}')
    assert answer == {"ok": False, "error": "fault 1: at must be seconds 0..86400, got nan"}
    time.sleep(0.2)
    alive(board)


@pytest.mark.parametrize("fields,error", [
    ({"kind": "telemetry", "power_mw": -1}, "power_mw must be an integer 0..0xffffffff (u32), got -1"),
    ({"kind": "telemetry", "temperature_mc": 1 << 32}, "temperature_mc must be an integer 0..0xffffffff"),
    ({"kind": "exception", "tile": 0x10000000000}, "tile must be an integer 0..1471, got 1099511627776"),
    ({"kind": "exception", "address": -5}, "address must be an integer 0..0xffffffff (u32), got -5"),
    ({"kind": "parity", "tile": 99999, "address": 0}, "tile must be an integer 0..1471, got 99999"),
    ({"kind": "icu-message", "words": [1, 2, 3, 4, -1]}, "words must be a list of 5 u32"),
])
def test_out_of_range_values_never_reach_the_model(board: RunningDaemon, fields: dict[str, Any],
                                                   error: str) -> None:
    answer = request(board, op="inject", ipu=1, **fields)
    assert not answer["ok"] and answer["error"].startswith(error)
    device_answers(board, 1)
    info = subprocess.run(ipufs_command("info", "-d", "1", "--dev", str(board.mountpoint)), capture_output=True,
                          text=True, timeout=30)
    assert info.returncode == 0, info.stderr


def test_an_overlong_request_is_answered_line_too_long(board: RunningDaemon) -> None:
    for tail in (b"", b"\n"):
        answer = ask(board, b'{"op": "status", "x": "' + b"y" * 70_000 + b'"}' + tail)
        assert answer == {"ok": False, "error": "line too long: a request is at most 65536 bytes"}
    alive(board)


def test_idle_connections_are_closed_and_the_client_reconnects(board: RunningDaemon) -> None:
    board.daemon.control.idle_timeout = 0.3
    with Control.of_mount(board.mountpoint) as control:
        assert control.status()["mode"]
        with socket.socket(socket.AF_UNIX) as idle:
            idle.connect(board.daemon.config.control_path)
            idle.settimeout(5)
            assert json.loads(idle.makefile("rb").readline()) == {
                "ok": False, "error": "idle for 0.3 s: connection closed"}
            assert idle.recv(1) == b""
        assert control.status()["mode"]  # a new connection, made by itself


@pytest.fixture
def starved_daemon(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A real `ipufs mount` with the usual soft limit of 1024 descriptors."""
    mountpoint = tmp_path / "mnt"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    proc = subprocess.Popen(ipufs_command("mount", str(mountpoint), "--ipus", "1", "--profile", "ipu1",
                                          "--no-link-dev"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=limit)
    try:
        def serving() -> bool:
            try:
                return os.getxattr(mountpoint, "user.ipufs.pid") == str(proc.pid).encode()
            except OSError:
                return False

        assert wait_for(serving, 15), "daemon did not mount"
        yield mountpoint, proc
    finally:
        stop_processes(mountpoint, proc)


def test_a_thousand_idle_connections_cannot_starve_attach(starved_daemon: tuple[Path, subprocess.Popen[str]]) \
        -> None:
    mountpoint, proc = starved_daemon
    path = os.getxattr(mountpoint, "user.ipufs.control").decode()
    held = []
    try:
        deadline = time.monotonic() + 30
        for _ in range(1100):
            s = socket.socket(socket.AF_UNIX)
            held.append(s)
            s.setblocking(False)
            while True:  # a Unix socket's connect says EAGAIN while the backlog is full
                try:
                    s.connect(path)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, "the daemon stopped accepting"
                    time.sleep(0.001)
        assert wait_for(lambda: len(os.listdir(f"/proc/{proc.pid}/fd")) < 200, 10)
        client = PyClient(mountpoint, 0)
        try:
            assert client("attach") == "ok"
        finally:
            client.close()
        with Control.of_mount(mountpoint) as control:
            assert control.status()["ipus"][0]["ipu"] == 0
    finally:
        for s in held:
            s.close()
    proc.terminate()
    _, stderr = proc.communicate(timeout=15)
    assert "Traceback" not in stderr


# --- arbitrary JSON at every operation and every plan key --------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from([math.nan, math.inf, -math.inf, -1, 0, 1 << 32, 1 << 64, 0x10000000000, 99999, "gs1"]),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8)


def _toml(value: Any) -> str | None:
    """``value`` as a TOML value (None: TOML has no null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(v for v in map(_toml, value) if v is not None) + "]"
    items = ((json.dumps(k), _toml(v)) for k, v in value.items())
    return "{" + ", ".join(f"{k} = {v}" for k, v in items if v is not None) + "}"


def _fields(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(names), JSON, max_size=len(names))


OPS = {"status": [], "ipu": ["ipu"], "plan-log": [], "trace": ["ipu", "kinds"], "plan": ["toml"]}


@st.composite
def control_requests(draw: st.DrawFn) -> dict[str, Any]:
    choice = draw(st.sampled_from(["inject", "other", "junk"]))
    if choice == "inject":
        kind = draw(st.sampled_from([*KINDS, "explode"]))
        names = [f.name for f in KINDS[kind].fields] if kind in KINDS else []
        return {"op": "inject", "kind": kind, **draw(_fields([*names, "ipu", "kind", "couse"]))}
    if choice == "other":
        op = draw(st.sampled_from(list(OPS)))
        return {"op": op, **draw(_fields([*OPS[op], "extra"]))}
    return {"op": draw(JSON), **draw(st.dictionaries(st.text(max_size=6), JSON, max_size=3))}


@st.composite
def plans(draw: st.DrawFn) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append(f"seed = {_toml(draw(JSON)) or 0}")
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(list(KINDS)))
        lines += ["[[fault]]", f'kind = "{kind}"']
        names = [f.name for f in KINDS[kind].fields] + sorted(PLAN_KEYS) + ["ipu", "couse"]
        for key, value in draw(_fields(names)).items():
            text = _toml(value)
            if text is not None:
                lines.append(f"{json.dumps(key)} = {text}")
    return "\n".join(lines)


def _answer_of(board: RunningDaemon, fields: dict[str, Any]) -> dict[str, Any]:
    line = json.dumps(fields).encode()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(board.daemon.config.control_path)
        s.sendall(line + b"\n")
        answer = s.makefile("rb").readline()  # a trace's first line; closing ends it
    assert answer, f"no answer to {line[:200]!r}"
    message: dict[str, Any] = json.loads(answer)
    assert message["ok"] is True or isinstance(message["error"], str)
    return message


def test_arbitrary_json_at_every_operation_and_plan_key(board: RunningDaemon) -> None:
    profile = settings(max_examples=120, deadline=None, derandomize=True,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

    @profile
    @given(control_requests())
    def requests(fields: dict[str, Any]) -> None:
        _answer_of(board, fields)
        device_answers(board, 0)

    @settings(profile, max_examples=60)
    @given(plans())
    def plan_texts(text: str) -> None:
        _answer_of(board, {"op": "plan", "toml": text})
        device_answers(board, 0)

    requests()
    plan_texts()
    assert request(board, op="plan", toml="")["ok"]
    assert request(board, op="inject", kind="icu-recover")["ok"]
    alive(board)


def test_docs_list_every_operation(board: RunningDaemon) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "control.md").read_text()
    assert all(f"| `{op}` |" in text for op in board.daemon.control.operations)
