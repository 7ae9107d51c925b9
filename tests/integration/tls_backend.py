"""A real backend serving wss, for the remote tests (integration and desktop).

Where it listens: the machine's first non-loopback IPv4 address when it has one that can be
bound (then the backend makes its own self-signed certificate, the path a person takes with
`--listen HOST:PORT`); with none (a CI box without a network, or
TURNKEY_TEST_LOOPBACK_TLS=1), 127.0.0.1 with `--tls-cert`/`--tls-key` of a certificate made
here, which forces TLS on loopback.
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import subprocess
from pathlib import Path

from backend.server.tls import make_certificate
from shared.remote import RemoteTarget

from .backend_proc import Backend


def outside_address() -> str | None:
    """A non-loopback IPv4 address of this machine that a server can bind, or None (also
    with TURNKEY_TEST_LOOPBACK_TLS=1, to run here what a box without a network runs)."""
    if os.environ.get("TURNKEY_TEST_LOOPBACK_TLS") == "1":
        return None
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for word in out.split():
        if ":" in word or word.startswith("127."):
            continue
        with socket.socket() as s:
            try:
                s.bind((word, 0))
            except OSError:
                continue
        return word
    return None


def write_cert(folder: Path, host: str) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    cert_pem, key_pem = make_certificate(host)
    cert, key = folder / "given-cert.pem", folder / "given-key.pem"
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    return cert, key


def der_fingerprint(cert: Path) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()


class TlsBackend(Backend):
    """The real backend process, listening where `listen_args` say."""

    def __init__(self, data_dir: Path, base_url: str, listen_args: list[str],
                 store: str | None = None) -> None:
        super().__init__(data_dir, base_url, store=store)
        self.listen_args = listen_args

    def command(self) -> list[str]:
        return [*super().command(), *self.listen_args]

    @property
    def target_host(self) -> str:
        return str(self.info["host"])

    def owner_target(self, fingerprint: str | None = None) -> RemoteTarget:
        fp = self.info["tls_fingerprint"] if fingerprint is None else fingerprint
        return RemoteTarget(self.target_host, self.port, self.token, fp)


def start_tls_backend(data_dir: Path, base_url: str, host: str | None,
                      port: int = 0, store: str | None = None) -> TlsBackend:
    """On `host` (a self-signed certificate the backend makes), or with host None on
    loopback with a certificate given on the command line; on `port` (0: a free one);
    on `store` (Backend's: a PostgreSQL URL, or None for SQLite)."""
    if host is not None:
        args = ["--listen", f"{host}:{port}"]
    else:
        cert, key = write_cert(data_dir.parent / "given", "127.0.0.1")
        args = ["--listen", f"127.0.0.1:{port}", "--tls-cert", str(cert), "--tls-key", str(key)]
    backend = TlsBackend(data_dir, base_url, args, store)
    backend.start()
    return backend


def free_port(host: str) -> int:
    """A port free on `host` now, for a backend that must come back on the same one."""
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port
