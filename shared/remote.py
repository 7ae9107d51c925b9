"""A remote backend as a person hands it over: the connection string, and the pin it carries.

`turnkey token create` prints `turnkey://HOST:PORT?token=SECRET&fp=SHA256HEX`; the app and
`turnkey --remote` accept it.  `fp` is the SHA-256 of the backend's TLS certificate (64 hex
digits): the client compares the certificate it is shown with it and trusts nothing else
(no certificate authority vouches for a self-signed certificate).  Without `fp` the string
may only name a loopback host, reached with plain ws, as the local app does.

No asyncio or websockets here: the command line parses `--remote` before loading those.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import NamedTuple
from urllib.parse import parse_qs, quote, urlsplit

SCHEME = "turnkey"
HEX64 = re.compile(r"[0-9a-f]{64}")


class BadConnectionString(ValueError):
    """The string is not a Turnkey connection string; the message says what is wrong."""


class RemoteTarget(NamedTuple):
    host: str
    port: int
    token: str
    fingerprint: str  # 64 lowercase hex digits, or "" for plain ws on loopback

    @property
    def url(self) -> str:
        scheme = "wss" if self.fingerprint else "ws"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}/rpc"

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        text = f"{SCHEME}://{host}:{self.port}?token={quote(self.token, safe='')}"
        return f"{text}&fp={self.fingerprint}" if self.fingerprint else text


def fingerprint_of_der(der: bytes) -> str:
    """A certificate's pin: SHA-256 of its DER bytes, lowercase hex."""
    return hashlib.sha256(der).hexdigest()


def normal_fingerprint(text: str) -> str:
    """`AB:CD:...` or `abcd...` as 64 lowercase hex digits; raises BadConnectionString."""
    fp = text.replace(":", "").strip().lower()
    if not HEX64.fullmatch(fp):
        raise BadConnectionString("fp must be the certificate's SHA-256: 64 hex digits "
                                  "(colons allowed)")
    return fp


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse(text: str) -> RemoteTarget:
    """The target a connection string names; raises BadConnectionString saying what to fix."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as exc:
        raise BadConnectionString(f"not a connection string ({exc}); expected "
                                  f"{SCHEME}://HOST:PORT?token=...&fp=...") from None
    if parts.scheme != SCHEME or not parts.hostname:
        raise BadConnectionString(f"a connection string starts with {SCHEME}://HOST:PORT "
                                  "(print one with `turnkey token create`)")
    if port is None:
        raise BadConnectionString("the connection string has no port: "
                                  f"{SCHEME}://HOST:PORT?token=...")
    query = parse_qs(parts.query, keep_blank_values=True)
    tokens = query.get("token", [])
    if len(tokens) != 1 or not tokens[0]:
        raise BadConnectionString("the connection string needs exactly one token=...")
    fps = query.get("fp", [])
    if len(fps) > 1:
        raise BadConnectionString("the connection string has more than one fp=")
    fp = normal_fingerprint(fps[0]) if fps else ""
    if not fp and not is_loopback(parts.hostname):
        raise BadConnectionString(f"{parts.hostname} is not this computer, so the connection "
                                  "must use TLS: add fp=SHA256 of the backend's certificate")
    return RemoteTarget(parts.hostname, port, tokens[0], fp)
