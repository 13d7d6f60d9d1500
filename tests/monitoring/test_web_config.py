# TLS and basic authentication from a web configuration file, as
# Prometheus's exporter-toolkit reads one (--web.config.file): a real
# certificate made by openssl, bcrypt hashes as htpasswd writes them
# ($2y$) and as Python's bcrypt does ($2b$), the file read again when it
# changes, and one-line refusals of files it cannot use.
from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.harness import RunningDaemon, ipufs_command, wait_for
from tests.monitoring.conftest import ExporterProcess

bcrypt = pytest.importorskip("bcrypt", reason="basic authentication needs bcrypt (the prometheus extra)")
pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificate")]


def _certificate(where: Path) -> tuple[Path, Path]:
    cert, key = where / "server.crt", where / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _hash(password: str, prefix: str = "$2y$") -> str:
    """A bcrypt hash at the lowest cost; $2y$ is what htpasswd -B writes."""
    return prefix + bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()[4:]


def _get(url: str, cafile: Path, user: str | None = None, password: str = "") -> int:
    request = urllib.request.Request(url)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=20, context=ssl.create_default_context(cafile=str(cafile))) as r:
            assert b"ipufs_up" in r.read()
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_tls_and_basic_authentication(board: RunningDaemon, tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    config = tmp_path / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
                      f"basic_auth_users:\n  alice: '{_hash('wonderland')}'\n  bob: '{_hash('builder', '$2b$')}'\n")
    e = ExporterProcess(board.mountpoint, "--web.config.file", str(config))
    try:
        assert e.url.startswith("https://127.0.0.1:")
        metrics = e.url + "/metrics"
        assert _get(metrics, cert) == 401
        assert _get(metrics, cert, "alice", "wrong") == 401
        assert _get(metrics, cert, "mallory", "wonderland") == 401
        assert _get(metrics, cert, "alice", "wonderland") == 200
        assert _get(metrics, cert, "bob", "builder") == 200
        with socket.create_connection(("127.0.0.1", e.port), timeout=20) as plain_http:
            plain_http.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert not plain_http.recv(4096).startswith(b"HTTP/")  # not TLS: no answer, the connection closed
        # a new password applies to the next request, without a restart
        config.write_text(config.read_text().replace(_hash_line(config, "alice"), f"'{_hash('queen')}'"))
        assert wait_for(lambda: _get(metrics, cert, "alice", "queen") == 200, 20)
        assert _get(metrics, cert, "alice", "wonderland") == 401
    finally:
        e.close()


def _hash_line(config: Path, user: str) -> str:
    line = next(line for line in config.read_text().splitlines() if line.strip().startswith(f"{user}:"))
    return line.split(": ", 1)[1]


def test_toml_with_plain_http_and_authentication(board: RunningDaemon, tmp_path: Path) -> None:
    config = tmp_path / "web.toml"
    config.write_text(f"[basic_auth_users]\nalice = '{_hash('wonderland')}'\n")
    e = ExporterProcess(board.mountpoint, "--web.config.file", str(config))
    try:
        request = urllib.request.Request(e.url + "/metrics")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=20)
        refused.value.close()  # the error holds the response's socket
        assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"] == 'Basic realm="ipufs exporter"'
        request.add_header("Authorization", "Basic " + base64.b64encode(b"alice:wonderland").decode())
        with urllib.request.urlopen(request, timeout=20) as r:
            assert r.status == 200
    finally:
        e.close()


@pytest.mark.parametrize("text,says", [
    ("rate_limit:\n  burst: 20\n", "rate_limit: not supported by ipufs"),
    ("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n", "No such file"),
    ("tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "cipher_suites: not supported"),
    ("tls_server_config:\n  client_auth_type: RequestClientCert\n", "'RequestClientCert' is not one of"),
    ("basic_auth_users:\n  alice: secret\n", "alice: not a bcrypt hash"),
    ("[not yaml\n", "web.yml"),
])
def test_a_file_it_cannot_use_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    config = tmp_path / "web.yml"
    config.write_text(text)
    out = subprocess.run(ipufs_command("exporter", "--dev", str(tmp_path), "--listen", "127.0.0.1:0",
                                       "--web.config.file", str(config)), capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and out.stderr.count("\n") <= 2 and "Traceback" not in out.stderr, out.stderr
    assert says in out.stderr, out.stderr
