"""API keys: stored in the OS keyring (service `turnkey`), or a 0600 file where no keyring works.

Keys are read once per process and cached, so a desktop keychain prompts at
most once.  They never go to SQLite, config.toml, logs, events or errors:
callers get the value only to put it in a request header.  Where no keyring
backend works (a headless box without a Secret Service), keys go to
DIR/secrets.json, created 0600, and `set` says so, so the user is told the
key is kept in plain text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Literal

from backend.config import write_atomic
from backend.errors import InvalidParams
from shared import protocol as p

log = logging.getLogger("providers")

SERVICE = "turnkey"
FILE_NAME = "secrets.json"

StoredIn = Literal["keyring", "file"]
MAX_SECRET_BYTES = 8 * 1024


class Secrets:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._cache: dict[str, str | None] = {}
        self._lock = asyncio.Lock()  # secrets.json is read, changed and rewritten

    def get(self, name: str) -> str | None:
        """The named key from the keyring or the file (cached for the process's life)."""
        if name not in self._cache:
            self._cache[name] = _keyring_get(name) or self._file().get(name)
        return self._cache[name]

    def set(self, name: str, value: str) -> StoredIn:
        """Stores the key; returns where.  A key set here replaces the cached one."""
        stored: StoredIn
        if _keyring_set(name, value):
            stored = "keyring"
            self._remove_from_file(name)  # one place for a key, so an old copy cannot win
        else:
            data = self._file()
            data[name] = value
            write_atomic(self.path, json.dumps(data, indent=2).encode(), mode=0o600)
            stored = "file"
        self._cache[name] = value
        log.info("secret %r stored in the %s", name, stored)  # the name only, never the value
        return stored

    async def store(self, name: str, raw: str) -> p.SecretSetResult:
        """`secret.set`: the value checked, stored off the event loop (a keyring call may
        block on D-Bus or a keychain prompt), and where it went, in words when that is a
        plain-text file.  Providers see it at their next call (the registry rebuilds a client
        whose key changed); a door using it is the caller's to start again."""
        value = checked(raw)
        async with self._lock:
            stored = await asyncio.to_thread(self.set, name, value)
        warning = None
        if stored == "file":
            warning = (f"no keyring works on this machine, so the key is kept in plain text in "
                       f"{self.path} (mode 0600: only your user can read it)")
        return p.SecretSetResult(stored=stored, warning=warning)

    def _file(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("%s is unreadable (%s); ignoring it", self.path, type(exc).__name__)
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} \
            if isinstance(data, dict) else {}

    def _remove_from_file(self, name: str) -> None:
        data = self._file()
        if name in data:
            del data[name]
            write_atomic(self.path, json.dumps(data, indent=2).encode(), mode=0o600)


def checked(raw: str, field: str = "value") -> str:
    """A key as sent: trimmed (pasted keys end in a newline), 1 byte to 8 KiB.  Errors
    describe the value, never quote it (dispatch already refused lone surrogates)."""
    value = raw.strip()
    if not value:
        raise InvalidParams(field, f"{field} is empty (surrounding whitespace is trimmed)")
    if len(value.encode()) > MAX_SECRET_BYTES:
        raise InvalidParams(field, f"{field} is longer than {MAX_SECRET_BYTES // 1024} KiB")
    if not (value.isascii() and value.isprintable()):
        # Keys and tokens travel in HTTP headers, which carry printable ASCII only: such a
        # value could never be sent, so every request with it would fail.
        raise InvalidParams(field, f"{field} has a character that is not printable ASCII; keys "
                            "and tokens are letters, digits and punctuation (was the wrong "
                            "text pasted?)")
    return value


def _keyring_get(name: str) -> str | None:
    if os.environ.get("TURNKEY_NO_KEYRING") == "1":
        return None
    try:
        import keyring
        from keyring.errors import KeyringError

        try:
            value: str | None = keyring.get_password(SERVICE, name)
            return value
        except KeyringError:
            return None
    except Exception as exc:  # a broken backend (D-Bus gone, locked keychain) is not fatal
        log.warning("keyring lookup failed: %s", type(exc).__name__)
        return None


def _keyring_set(name: str, value: str) -> bool:
    if os.environ.get("TURNKEY_NO_KEYRING") == "1":
        return False
    try:
        import keyring
        from keyring.errors import KeyringError

        try:
            keyring.set_password(SERVICE, name, value)
            return True
        except KeyringError:
            return False
    except Exception as exc:
        log.warning("keyring store failed: %s", type(exc).__name__)
        return False
