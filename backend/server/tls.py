"""TLS for a backend that listens beyond loopback: its certificate, its fingerprint, its context.

Off loopback the bearer token would cross the network in clear, so TLS is mandatory there.
A person who gives no certificate gets a self-signed one, made once into DIR/tls/ and kept,
so its SHA-256 fingerprint (published in backend.json and printed in each connection
string) stays the same across restarts: clients pin that fingerprint instead of trusting a
certificate authority, which a self-signed certificate has none of.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
from pathlib import Path
from typing import NamedTuple

from backend.errors import ConfigError
from shared.remote import fingerprint_of_der

log = logging.getLogger("backend")

TLS_DIR = "tls"
CERT_NAME = "cert.pem"
KEY_NAME = "key.pem"
VALID_DAYS = 3650  # pinned, not trusted through a chain: its expiry protects nothing


class TlsFiles(NamedTuple):
    cert: Path
    key: Path


def self_signed(data_dir: Path, host: str) -> TlsFiles:
    """DIR/tls/cert.pem and key.pem, made on the first call and reused after (a new key at
    each start would break every client's pin)."""
    folder = data_dir / TLS_DIR
    files = TlsFiles(folder / CERT_NAME, folder / KEY_NAME)
    if files.cert.is_file() and files.key.is_file():
        return files
    cert_pem, key_pem = make_certificate(host)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_private(files.key, key_pem)
        _write_private(files.cert, cert_pem)  # written last: its presence says both are whole
    except OSError as exc:
        raise ConfigError(f"cannot write the TLS certificate into {folder}: {exc}; free some "
                          "space or give one with --tls-cert and --tls-key") from None
    log.info("made a self-signed TLS certificate in %s", folder)
    return files


def make_certificate(host: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for `host` and its private key, both PEM (an EC P-256 key:
    small and fast to make)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Turnkey backend")])
    now = datetime.datetime.now(datetime.UTC)
    alt: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        alt.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        if host:
            alt.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)  # an older file of looser mode keeps its mode through O_CREAT


def fingerprint(cert_path: Path) -> str:
    """SHA-256 of the first certificate in a PEM file, 64 lowercase hex digits: what the
    client compares with the peer certificate it is shown."""
    try:
        text = cert_path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the TLS certificate {cert_path}: {exc}") from None
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        raise ConfigError(f"{cert_path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(text[start:stop + len(end)]))


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """The listener's context: TLS 1.2 or newer, no client certificates (the bearer token
    authenticates the client)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot use the TLS certificate {files.cert} with the key "
                          f"{files.key}: {exc}") from None
    return context
