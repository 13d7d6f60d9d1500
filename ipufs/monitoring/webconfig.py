# TLS and basic authentication for `ipufs exporter`, configured as
# Prometheus's exporter-toolkit configures its exporters: a web
# configuration file (--web.config.file) holding `tls_server_config`
# (cert_file/key_file or inline cert/key, client_auth_type,
# client_ca_file, min_version, max_version) and `basic_auth_users` (user:
# bcrypt hash). YAML as the toolkit reads it, or the same keys in TOML (a
# file ending in .toml). The file is read again when it or a file it names
# changes, so a renewed certificate applies to the next connection; a
# change that does not load keeps the last good one (and says why in the
# log). A key this module does not implement is refused, never ignored.
from __future__ import annotations

import hashlib
import logging
import os
import ssl
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("ipufs")
TLS_KEYS = {"cert_file", "key_file", "cert", "key", "client_auth_type", "client_ca_file", "min_version",
            "max_version"}
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
            "TLS13": ssl.TLSVersion.TLSv1_3}
#: The bcrypt variants accepted (golang.org/x/crypto/bcrypt, which the
#: toolkit uses, reads these three).
BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
#: Successful checks remembered (bcrypt costs ~50 ms a check at cost 10).
KEPT_CHECKS = 256


class WebConfigError(ValueError):
    """The file cannot be used; the message names the key and why."""


@dataclass(frozen=True)
class WebConfig:
    tls: ssl.SSLContext | None
    users: dict[str, bytes]  # user -> bcrypt hash
    files: tuple[Path, ...]  # the file and every file it names, whose changes reload it


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    try:
        import yaml
    except ImportError:
        raise WebConfigError(f"{path}: reading YAML needs PyYAML (pip install 'ipufs[prometheus]'), "
                             "or write the same keys in a .toml file") from None
    data = yaml.safe_load(text)
    return {} if data is None else data


def load(path: Path) -> WebConfig:
    """Read and check the web configuration file at ``path``."""
    try:
        data = _read(path)
    except WebConfigError:
        raise
    except OSError as exc:
        raise WebConfigError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # YAML and TOML syntax errors are ValueErrors or YAMLErrors
        raise WebConfigError(f"{path}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError: say where, in one line
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise WebConfigError(f"{path}: not YAML: {getattr(exc, 'problem', None) or exc}{where}") from None
    if not isinstance(data, dict):
        raise WebConfigError(f"{path}: not a mapping of settings")
    unknown = set(data) - {"tls_server_config", "basic_auth_users"}
    if unknown:
        raise WebConfigError(f"{path}: {', '.join(sorted(unknown))}: not supported by ipufs (it reads "
                             "tls_server_config and basic_auth_users)")
    files = [path]
    tls = _tls(path, data.get("tls_server_config"), files)
    users = _users(path, data.get("basic_auth_users") or {})
    return WebConfig(tls, users, tuple(files))


def _tls(path: Path, section: Any, files: list[Path]) -> ssl.SSLContext | None:
    if section is None:
        return None
    if not isinstance(section, dict):
        raise WebConfigError(f"{path}: tls_server_config is not a mapping")
    unknown = set(section) - TLS_KEYS
    if unknown:
        raise WebConfigError(f"{path}: tls_server_config: {', '.join(sorted(unknown))}: not supported by ipufs "
                             f"(it reads {', '.join(sorted(TLS_KEYS))})")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.minimum_version = VERSIONS[section.get("min_version", "TLS12")]
        context.maximum_version = VERSIONS[section.get("max_version", "TLS13")]
        context.verify_mode = CLIENT_AUTH[section.get("client_auth_type", "NoClientCert")]
    except KeyError as exc:
        raise WebConfigError(f"{path}: tls_server_config: {exc.args[0]!r} is not one of "
                             f"{', '.join(CLIENT_AUTH)} (client_auth_type) or {', '.join(VERSIONS)} "
                             "(min_version, max_version)") from None
    cert, key = _pem(section, "cert", files), _pem(section, "key", files)
    if cert is None or key is None:
        raise WebConfigError(f"{path}: tls_server_config needs cert_file (or cert) and key_file (or key)")
    try:
        context.load_cert_chain(cert, key)
        if "client_ca_file" in section:
            files.append(Path(section["client_ca_file"]))
            context.load_verify_locations(section["client_ca_file"])
        elif context.verify_mode != ssl.CERT_NONE:
            raise WebConfigError(f"{path}: client_auth_type {section['client_auth_type']} needs client_ca_file")
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(f"{path}: tls_server_config: {exc}") from None
    finally:
        for name in (cert, key):
            if name is not None and name.startswith("/proc/self/fd/"):
                os.close(int(name.rsplit("/", 1)[1]))
    return context


def _pem(section: dict[str, Any], kind: str, files: list[Path]) -> str | None:
    """The path of the cert or key: its file, or the inline PEM text put
    in an anonymous memory file (ssl reads PEM from paths only)."""
    if f"{kind}_file" in section:
        files.append(Path(section[f"{kind}_file"]))
        return str(section[f"{kind}_file"])
    if kind in section:
        fd = os.memfd_create(f"ipufs-web-{kind}")
        os.write(fd, str(section[kind]).encode())
        return f"/proc/self/fd/{fd}"
    return None


def _users(path: Path, section: Any) -> dict[str, bytes]:
    if not isinstance(section, dict):
        raise WebConfigError(f"{path}: basic_auth_users is not a mapping of user: bcrypt hash")
    users = {}
    for user, hashed in section.items():
        if not isinstance(hashed, str) or not hashed.startswith(BCRYPT_PREFIXES) or len(hashed) != 60:
            raise WebConfigError(f"{path}: basic_auth_users: {user}: not a bcrypt hash ($2y$10$... as "
                                 "`htpasswd -nBC 10 \"\" | tr -d ':\\n'` prints)")
        users[str(user)] = hashed.encode()
    if users:
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            raise WebConfigError(f"{path}: basic_auth_users needs the bcrypt package "
                                 "(pip install 'ipufs[prometheus]')") from None
    return users


class WebConfigFile:
    """The configuration in force from ``path``, read again when it or a
    file it names changes (checked at most once a connection)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.config = load(path)
        self._stamp = self._stamps(self.config)
        self._checked: set[bytes] = set()
        self._lock = threading.Lock()

    @staticmethod
    def _stamps(config: WebConfig) -> tuple[tuple[int, int], ...]:
        out = []
        for f in config.files:
            try:
                st = os.stat(f)
                out.append((st.st_mtime_ns, st.st_ino))
            except OSError:
                out.append((0, 0))
        return tuple(out)

    def current(self) -> WebConfig:
        stamp = self._stamps(self.config)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self.config = load(self.path)
                self._stamp = self._stamps(self.config)
                self._checked.clear()
                log.info("exporter: %s read again", self.path)
            except WebConfigError as exc:
                log.error("exporter: %s changed and cannot be used (%s): keeping the last good one", self.path, exc)
        return self.config

    def verify(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (bcrypt; a success is remembered
        so that a scraper's every request does not pay for a bcrypt check)."""
        hashed = self.config.users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(b"\0".join((user.encode(), password.encode(), hashed))).digest()
        with self._lock:
            if key in self._checked:
                return True
        import bcrypt

        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            if len(self._checked) >= KEPT_CHECKS:
                self._checked.clear()
            self._checked.add(key)
        return True
