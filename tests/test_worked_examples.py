# The worked examples of docs/architecture.md run as written: each is
# executed with the names its file has in scope, its rows are added to the
# real tables, and what the text promises is checked. An example that no
# longer fits the code fails here, not in a newcomer's hands.
from __future__ import annotations

import argparse
import dataclasses
import errno
import inspect
import os
import re
import socket
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from ipufs import cli
from ipufs.abi import ioctls as abi
from ipufs.abi.ioctls import Encoding, IoctlSpec, R
from ipufs.daemon import config as cfg
from ipufs.daemon import fault_kinds, faults, settings
from ipufs.daemon.fault_kinds import FaultKind
from ipufs.daemon.daemon import Daemon
from ipufs.daemon.fields import Integer, Limits
from ipufs.daemon.settings import Setting
from ipufs.driver import driver as drv
from ipufs.driver.arguments import U64, Arg, Command, Sizes
from ipufs.driver.devices import DeviceSet
from ipufs.driver.driver import IoctlRole, IpuDriver
from ipufs.fuse import requests as rq
from ipufs.fuse.kernel import KernelLink
from ipufs.fuse.operations import Operations
from ipufs.fuse.server import FuseServer
from ipufs.fuse import channel, transports
from ipufs.fuse.channel import FuseChannel, OnDevice
from ipufs.fuse.devfuse import ended
from ipufs.fuse.transport import Switch, Transport, TransportKind
from ipufs.model.profile import PROFILES
from tests.driver.rig import Rig
from tests.fuse import fakekernel as fk

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def example(heading: str) -> str:
    """The Python block of the section ``heading`` of architecture.md."""
    section = DOC.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"{heading}: expected one Python block"
    return str(blocks[0])


def run(heading: str, scope: dict[str, Any]) -> dict[str, Any]:
    exec(compile(example(heading), f"architecture.md: {heading}", "exec"), scope)
    return scope


def test_adding_an_ioctl(monkeypatch: pytest.MonkeyPatch) -> None:
    roles: dict[IoctlSpec, IoctlRole] = {}
    scope = run("Adding an ioctl", {
        "IoctlSpec": IoctlSpec, "Encoding": Encoding, "R": R, "IpuDriver": IpuDriver, "Arg": Arg,
        "Command": Command, "IoctlRole": IoctlRole, "Sizes": Sizes, "U64": U64, "IOCTL_ROLES": roles})
    spec = scope["GET_TEMPERATURE"]
    assert spec.nr not in abi.BY_NR and list(roles) == [spec]
    # The handler takes what the driver's own take (names and annotations).
    ours, theirs = (list(inspect.signature(f).parameters.values())[1:] for f in (scope["_temperature"], IpuDriver._reset))
    assert ours == theirs
    monkeypatch.setitem(abi.BY_NR, spec.nr, spec)
    monkeypatch.setitem(drv.IOCTL_ROLES, spec, roles[spec])
    devices = DeviceSet(PROFILES["ipu1"], 1)
    try:
        rig = Rig(devices)
        rig.processes.spawn(100)
        node = rig.fs.tree.by_name("ipu0")
        assert node is not None
        opened = rig.kernel.call(rq.Open, node.ino, os.O_RDONLY, ctx=rig.as_process(100))
        fh = int.from_bytes(opened.payload[:8], "little")
        reply = rig.kernel.call(rq.Ioctl, node.ino, fh, 0, spec.cmd, 0, memoryview(b""), 8,
                                ctx=rig.as_process(100))
        assert reply.error == 0, reply
        result, _, _, _ = struct.unpack_from("<iIII", reply.payload)
        assert (result, int.from_bytes(reply.payload[16:24], "little")) == (
            0, devices.ipus[0].icu.board.temperature_mc)
    finally:
        devices.close()


def test_adding_a_fault_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    scope = run("Adding a fault kind", {"FaultKind": FaultKind, "Integer": Integer})
    kind = scope["THERMAL_TRIP"]
    assert kind.name not in fault_kinds.KINDS
    monkeypatch.setitem(fault_kinds.KINDS, kind.name, kind)
    limits = Limits(ipus=1, tiles=4, contexts=7)
    with pytest.raises(faults.FaultError, match="temperature"):
        faults.parse({"kind": "thermal-trip", "ipu": 0, "temperature_mc": -1}, limits)
    fault = faults.parse({"kind": "thermal-trip", "ipu": 0, "temperature_mc": 110_000}, limits)
    devices = DeviceSet(PROFILES["ipu1"], 1)
    try:
        ipu = devices.ipus[0]
        fault.kind.action(ipu, fault.params, lambda seconds, action: None)
        assert (ipu.icu.board.temperature_mc, ipu.link_down, ipu.exception is not None) == (110_000, True, True)
    finally:
        devices.close()


def test_adding_a_mount_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    scope = run("Adding a mount setting", {"Setting": Setting})
    setting = scope["MAX_CLIENTS"]
    assert setting.key not in settings.BY_KEY
    monkeypatch.setattr(settings, "SETTINGS", (*settings.SETTINGS, setting))
    monkeypatch.setattr(settings, "RUN_SETTINGS", (*settings.RUN_SETTINGS, setting))
    monkeypatch.setitem(settings.BY_KEY, setting.key, setting)
    monkeypatch.setitem(cfg.TYPES, setting.key, setting.types)
    monkeypatch.setattr(cfg, "KEYS", cfg.KEYS | {setting.key})
    parser = cli.parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert sub["mount"].parse_args(["--max-clients", "8"]).max_clients == 8
    run_args = vars(sub["run"].parse_args(["--max-clients", "8", "--", "true"]))
    assert settings.mount_argv(run_args)[-2:] == ["--max-clients", "8"]
    assert "max_clients = 64" in settings.example_file()
    bad = tmp_path / "bad.toml"
    bad.write_text('max_clients = "eight"\n')
    with pytest.raises(ValueError, match="max_clients = .* must be an integer, such as max_clients = 64"):
        cfg.load(bad)
    # The field, and no line more: daemon_config() fills it from the setting.
    with_field = dataclasses.make_dataclass("DaemonConfig", [("max_clients", int, dataclasses.field(default=64))],
                                            bases=(cfg.DaemonConfig,))
    monkeypatch.setattr(cfg, "DaemonConfig", with_field)
    assert cfg.daemon_config({"max_clients": 8}).max_clients == 8  # type: ignore[attr-defined]
    assert cfg.daemon_config({}).max_clients == 64  # type: ignore[attr-defined]


def _plain_transport() -> dict[str, Any]:
    return run("Adding a transport", {
        "os": os, "OnDevice": OnDevice, "FuseChannel": FuseChannel, "channel": channel, "ended": ended,
        "TransportKind": TransportKind, "Switch": Switch})


def _with_row(monkeypatch: pytest.MonkeyPatch, row: TransportKind) -> None:
    """The transports' table with ``row`` before /dev/fuse's, and its switch
    a mount setting, as the table and settings.py would make them."""
    assert row.switch is not None and row.switch.key not in transports.SWITCHES
    monkeypatch.setattr(transports, "TRANSPORTS", (*transports.TRANSPORTS[:-1], row, transports.TRANSPORTS[-1]))
    monkeypatch.setitem(transports.SWITCHES, row.switch.key, row.switch)
    setting = settings.switch_setting(row.switch)
    monkeypatch.setattr(settings, "SETTINGS", (*settings.SETTINGS, setting))
    monkeypatch.setattr(settings, "RUN_SETTINGS", (*settings.RUN_SETTINGS, setting))
    monkeypatch.setitem(settings.BY_KEY, setting.key, setting)
    monkeypatch.setitem(cfg.TYPES, setting.key, setting.types)
    monkeypatch.setattr(cfg, "KEYS", cfg.KEYS | {setting.key})


def test_adding_a_transport() -> None:
    cls = _plain_transport()["PlainDevFuse"]
    members = {name for name in vars(Transport) if not name.startswith("_")}
    assert members and all(callable(getattr(cls, name, None)) for name in members)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # one message a request, as /dev/fuse
    transport = cls(FuseChannel(ours.detach()))
    server = FuseServer(Operations(), KernelLink(), "/nowhere", passthrough=False, lock=threading.RLock())
    reader = threading.Thread(target=server.serve, args=(transport,), daemon=True)
    reader.start()
    try:
        ctx = rq.Context(0, 0, 4242)
        theirs.settimeout(5)
        theirs.send(fk.encode(rq.Init(2, 0, ctx, 7, 44, 131072, (1 << 42) - 1)))
        init = fk.decode_reply(theirs.recv(1 << 16))
        assert (init.unique, init.error) == (2, 0) and server.session.negotiated is not None
        theirs.send(fk.encode(rq.Lookup(4, 1, ctx, b"anything")))
        lookup = fk.decode_reply(theirs.recv(1 << 16))
        assert (lookup.unique, lookup.error) == (4, errno.ENOSYS)  # Operations' default answer
    finally:
        theirs.close()  # the peer hangs up: the loop ends
        reader.join(5)
        transport.close()
    assert not reader.is_alive() and not transport.connected()


def test_a_transport_is_chosen_by_its_row_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    row = _plain_transport()["PLAIN"]
    _with_row(monkeypatch, row)
    assert transports.choose({}).kind is not row  # off by default
    parser = cli.parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    options = settings.given(vars(sub["mount"].parse_args([str(tmp_path / "mnt"), "--plain", "on", "--uring", "off", "--ipus", "1"])))
    run_args = vars(sub["run"].parse_args(["--plain", "on", "--", "true"]))
    assert settings.mount_argv(run_args)[-2:] == ["--plain", "on"]
    config = cfg.daemon_config({**options, "control": str(tmp_path / "ctl"), "link_dev": False, "cdi": False})
    daemon = Daemon(config)
    try:
        assert daemon.transport.kind is row and daemon.fast is None  # no fast path in it: none built
        assert daemon.transport_in_force() == "plain /dev/fuse (--plain on)"
    finally:
        daemon.devices.close()
    bad = tmp_path / "bad.toml"
    bad.write_text('plain = "sometimes"\n')
    with pytest.raises(ValueError, match="^--plain must be one of auto, on, off, not 'sometimes'$"):
        cfg.daemon_config(cfg.load(bad)).validate()


@pytest.mark.mount
def test_a_mount_serves_over_the_transport_added(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.integration.harness import running_daemon

    row = _plain_transport()["PLAIN"]
    _with_row(monkeypatch, row)
    with running_daemon(tmp_path / "mnt", ipus=1, profile="ipu1", transports={"plain": "on", "uring": "off"}) as d:
        assert os.getxattr(d.mountpoint, "user.ipufs.transport") == b"plain /dev/fuse (--plain on)"
        assert "ipu0" in os.listdir(d.mountpoint)  # looked up and listed through it
        assert type(d.daemon.server.transport).__name__ == "PlainDevFuse"
