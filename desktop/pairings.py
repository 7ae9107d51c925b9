"""Remote backends the app is paired with, remembered across runs.  Qt-free.

A pairing is what a connection string (shared/remote.py) names, under a label the person
chose: where the backend is (host, port), the certificate's pin, and the token.  The token
is a secret: it goes to the OS keyring (service `turnkey`, one entry per pairing), never to
a file of ours.  The rest is not secret and goes to the desktop's settings file,
DIR/desktop.json, under "backends", beside the window layout.  Removing a pairing forgets
both.

Where no keyring works (a headless box without a Secret Service, or TURNKEY_NO_KEYRING=1)
the pairing is kept for this run only and `remember` says so: the token is not written in
plain text anywhere.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any, NamedTuple

from shared.remote import RemoteTarget

log = logging.getLogger("desktop")

SETTINGS = "desktop.json"
KEY = "backends"
SERVICE = "turnkey"  # the keyring service provider keys use too


class Pairing(NamedTuple):
    """A remote backend as the app remembers it (no token: that is in the keyring)."""

    key: str  # "bk_…", names the keyring entry and the sidebar's section
    label: str  # what the person called it: "build-box"
    host: str
    port: int
    fingerprint: str

    @property
    def where(self) -> str:
        """"build-box (10.0.0.5)", or the host alone when the label is the host."""
        return self.host if self.label in ("", self.host) else f"{self.label} ({self.host})"

    @property
    def name(self) -> str:
        """The short name windows and notifications use: the label, else the host."""
        return self.label or self.host

    def target(self, token: str) -> RemoteTarget:
        return RemoteTarget(self.host, self.port, token, self.fingerprint)


def secret_name(key: str) -> str:
    """The keyring entry holding a pairing's token."""
    return f"backend-{key}"


def new_key() -> str:
    return "bk_" + secrets.token_hex(6)


# --- the settings file ---------------------------------------------------------------------


def read_settings(data_dir: Path) -> dict[str, Any]:
    """DIR/desktop.json as a dict ({} when missing or unreadable)."""
    try:
        data = json.loads((data_dir / SETTINGS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_settings(data_dir: Path, changes: dict[str, Any]) -> None:
    """Replaces the keys in `changes`, keeps every other (the layout and the pairings are
    saved at different times by different code).  Atomic; raises OSError."""
    data = read_settings(data_dir)
    data.update(changes)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / SETTINGS
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


# --- pairings ------------------------------------------------------------------------------


def load(data_dir: Path) -> list[Pairing]:
    """The remembered pairings, in the order they were made (a malformed entry is skipped)."""
    found: list[Pairing] = []
    for entry in read_settings(data_dir).get(KEY, []):
        try:
            found.append(Pairing(str(entry["key"]), str(entry.get("label", "")),
                                 str(entry["host"]), int(entry["port"]),
                                 str(entry.get("fingerprint", ""))))
        except (KeyError, TypeError, ValueError):
            log.warning("skipped a malformed backend in %s", data_dir / SETTINGS)
    return found


def _save(data_dir: Path, pairings: list[Pairing]) -> None:
    write_settings(data_dir, {KEY: [p._asdict() for p in pairings]})


def remember(data_dir: Path, pairing: Pairing, token: str) -> bool:
    """Stores the token in the keyring and the rest in the settings file; False (nothing
    stored) when no keyring works, so the pairing lasts for this run only."""
    if not keyring_set(secret_name(pairing.key), token):
        return False
    _save(data_dir, [*[p for p in load(data_dir) if p.key != pairing.key], pairing])
    log.info("remembered the backend %s on %s:%d", pairing.key, pairing.host, pairing.port)
    return True


def forget(data_dir: Path, key: str) -> None:
    """Removes the pairing from the settings file and its token from the keyring."""
    _save(data_dir, [p for p in load(data_dir) if p.key != key])
    keyring_delete(secret_name(key))
    log.info("forgot the backend %s", key)


def token_of(pairing: Pairing) -> str | None:
    return keyring_get(secret_name(pairing.key))


# --- the keyring ---------------------------------------------------------------------------


def _no_keyring() -> bool:
    return os.environ.get("TURNKEY_NO_KEYRING") == "1"


def keyring_get(name: str) -> str | None:
    if _no_keyring():
        return None
    try:
        import keyring

        value: str | None = keyring.get_password(SERVICE, name)
        return value
    except Exception as exc:  # a broken backend (D-Bus gone, locked keychain) is not fatal
        log.warning("keyring lookup failed: %s", type(exc).__name__)
        return None


def keyring_set(name: str, value: str) -> bool:
    if _no_keyring():
        return False
    try:
        import keyring

        keyring.set_password(SERVICE, name, value)
        return True
    except Exception as exc:  # the message could quote the value: the type only
        log.warning("keyring store failed: %s", type(exc).__name__)
        return False


def keyring_delete(name: str) -> None:
    if _no_keyring():
        return
    try:
        import keyring

        keyring.delete_password(SERVICE, name)
    except Exception as exc:  # already gone, or no keyring: nothing is left to forget
        log.info("keyring delete of %s: %s", name, type(exc).__name__)
