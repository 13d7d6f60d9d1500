# `ipufs device-plugin` from the command line: a configuration kubelet
# would refuse is one line and exit status 2, a missing kubernetes extra
# one line and status 1;
# SIGTERM stops it and removes its socket. The committed protobuf code
# still describes api.proto.
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deviceplugin.kubelet import TestKubelet
from tests.integration.harness import ROOT, RunningDaemon, ipufs_command

UNIT = ROOT / "systemd" / "ipufs-device-plugin.service"


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args,message", [
    (["--resource-name", "ipu"], "'ipu' is not an extended resource: vendor-domain/name, outside kubernetes.io"),
    (["--resource-name", "kubernetes.io/ipu"], "'kubernetes.io/ipu' is not an extended resource"),
    (["--cdi", "--cdi-prefix=-x"], "CDI prefix '-x': use letters, digits"),
    (["--endpoint", "kubelet.sock"], "--endpoint 'kubelet.sock' must be a file name in the socket directory"),
    (["--poll-interval", "0"], "intervals must be positive"),
])
def test_bad_configuration_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    out = run(*ipufs_command("device-plugin", "--dev", str(tmp_path), "--socket-dir", str(tmp_path), *args))
    assert out.returncode == 2
    assert out.stderr.startswith(f"ipufs device-plugin: {message}") and out.stderr.count("\n") == 1, out.stderr


def test_a_missing_extra_is_one_line(tmp_path: Path) -> None:
    # As if grpcio were not installed: the import fails.
    script = ("import sys; sys.modules['grpc'] = None; from ipufs.cli import main; "
              f"sys.exit(main(['device-plugin', '--dev', '{tmp_path}', '--socket-dir', '{tmp_path}']))")
    out = run(sys.executable, "-c", script)
    assert out.returncode == 1
    assert out.stderr.startswith("ipufs device-plugin: the device plugin needs grpcio and protobuf 7: "
                                 "pip install 'ipufs[kubernetes]'") and out.stderr.count("\n") == 1, out.stderr


@pytest.mark.mount
def test_ready_once_registered_and_sigterm_removes_its_socket(node: RunningDaemon, kubelet: TestKubelet) -> None:
    notify = kubelet.socket_dir / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(notify))
        systemd.settimeout(20)
        proc = subprocess.Popen(ipufs_command("device-plugin", "--dev", str(node.mountpoint), "--socket-dir",
                                              str(kubelet.socket_dir)), env={**os.environ, "NOTIFY_SOCKET": str(notify)},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert systemd.recv(4096).decode().splitlines() == [
                "READY=1", f"STATUS=8 IPUs of {node.mountpoint} offered as graphcore.ai/ipu"]
            connection = kubelet.next_registration(timeout=0)  # registered before it said so
            plugin_socket = kubelet.socket_dir / connection.endpoint
            assert plugin_socket.is_socket()
            connection.wait_list(lambda devices: len(devices) == 8)  # the stream is up
            proc.send_signal(signal.SIGTERM)
            assert systemd.recv(4096) == b"STOPPING=1"
            assert proc.wait(10) == 0
            assert not plugin_socket.exists()
            assert connection.ended.wait(5)
        finally:
            proc.kill()
            proc.communicate()


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_unit_file_is_valid(tmp_path: Path) -> None:
    exe = shutil.which("ipufs") or str(Path(sys.executable).with_name("ipufs"))
    unit = tmp_path / UNIT.name
    text = UNIT.read_text()
    assert "Type=notify" in text and "Restart=on-failure" in text and "PrivateTmp" not in text
    unit.write_text(text.replace("/usr/local/bin/ipufs", exe))
    out = run("systemd-analyze", "verify", str(unit))
    problems = [line for line in out.stderr.splitlines() if UNIT.name in line]
    assert out.returncode == 0 and not problems, out.stderr


@pytest.mark.parametrize("name", ["api", "podresources"])
def test_generated_code_matches_the_protocol_definition(name: str) -> None:
    pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the test extra)")
    import importlib

    from google.protobuf import descriptor_pb2

    from ipufs.deviceplugin import gencode

    generated = importlib.import_module(f"ipufs.deviceplugin.{name}_pb2")
    proto = gencode.PROTO.with_name(f"{name}.proto")

    def plain(messages: Any) -> None:
        # protoc keeps json_name out of the descriptor it embeds in code.
        for message in messages:
            for f in message.field:
                f.ClearField("json_name")
            plain(message.nested_type)

    (compiled,) = descriptor_pb2.FileDescriptorSet.FromString(gencode.descriptor_set(proto)).file
    committed = descriptor_pb2.FileDescriptorProto.FromString(generated.DESCRIPTOR.serialized_pb)
    plain(compiled.message_type)
    plain(committed.message_type)
    assert compiled == committed, f"{name}.proto changed: run python -m ipufs.deviceplugin.gencode"
    stubs = (Path(gencode.PACKAGE) / f"{name}_pb2.pyi").read_text()
    for message in committed.message_type:
        assert f"class {message.name}(_message.Message):" in stubs
