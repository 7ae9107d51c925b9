"""Secrets: the keyring path, the 0600 file fallback, the per-process cache, and no value in logs."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import PasswordDeleteError

from backend.secrets import SERVICE, Secrets

KEY = "sk-test-UNIT-0123456789abcdef"


class MemoryKeyring(KeyringBackend):
    """A keyring in a dict that counts its reads."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # keyring ships no annotations
        self.store: dict[tuple[str, str], str] = {}
        self.reads = 0

    def get_password(self, service: str, username: str) -> str | None:
        self.reads += 1
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.store.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


class BrokenKeyring(MemoryKeyring):
    """A backend that fails the way a dead D-Bus does: not with a KeyringError."""

    def get_password(self, service: str, username: str) -> str | None:
        raise RuntimeError("org.freedesktop.DBus.Error.ServiceUnknown")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError(f"could not store {password}")  # a backend that quotes the value


@pytest.fixture
def use_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    monkeypatch.delenv("TURNKEY_NO_KEYRING", raising=False)
    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("TURNKEY_NO_KEYRING", raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # type: ignore[no-untyped-call]  # (no annotations)
    yield
    keyring.set_keyring(previous)


def _file(tmp_path: Path) -> dict[str, str]:
    data: dict[str, str] = json.loads((tmp_path / "secrets.json").read_text())
    return data


def test_keyring_path_stores_under_the_turnkey_service(tmp_path: Path, use_keyring: MemoryKeyring) -> None:
    assert Secrets(tmp_path).set("openai", KEY) == "keyring"
    assert use_keyring.store == {(SERVICE, "openai"): KEY}
    assert not (tmp_path / "secrets.json").exists(), "a key in the keyring is not also on disk"
    assert Secrets(tmp_path).get("openai") == KEY, "another process reads it back"


def test_one_keyring_read_per_name_per_process(tmp_path: Path, use_keyring: MemoryKeyring) -> None:
    use_keyring.store[(SERVICE, "openai")] = KEY
    secrets = Secrets(tmp_path)
    assert [secrets.get("openai") for _ in range(3)] == [KEY] * 3
    assert use_keyring.reads == 1
    assert secrets.get("missing") is None
    assert secrets.get("missing") is None
    assert use_keyring.reads == 2, "a missing key is cached too: no prompt per call"


def test_set_replaces_the_cached_value(tmp_path: Path, use_keyring: MemoryKeyring) -> None:
    use_keyring.store[(SERVICE, "openai")] = "sk-old-value-000000"
    secrets = Secrets(tmp_path)
    assert secrets.get("openai") == "sk-old-value-000000"
    secrets.set("openai", KEY)
    assert secrets.get("openai") == KEY
    assert use_keyring.reads == 1, "the new value came from the cache, not a second read"


def test_set_in_the_keyring_removes_a_file_copy(tmp_path: Path, use_keyring: MemoryKeyring) -> None:
    (tmp_path / "secrets.json").write_text(json.dumps({"openai": "sk-stale-000000", "other": "x"}))
    assert Secrets(tmp_path).set("openai", KEY) == "keyring"
    assert _file(tmp_path) == {"other": "x"}, "the stale copy is gone, the other key kept"
    assert Secrets(tmp_path).get("openai") == KEY


def test_keyring_wins_over_the_file(tmp_path: Path, use_keyring: MemoryKeyring) -> None:
    (tmp_path / "secrets.json").write_text(json.dumps({"openai": "sk-file-000000"}))
    use_keyring.store[(SERVICE, "openai")] = KEY
    assert Secrets(tmp_path).get("openai") == KEY


def test_no_keyring_falls_back_to_a_0600_file(tmp_path: Path, no_keyring: None) -> None:
    secrets = Secrets(tmp_path)
    assert secrets.set("openai", KEY) == "file"
    assert secrets.set("anthropic", "sk-ant-000000") == "file"
    path = tmp_path / "secrets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _file(tmp_path) == {"openai": KEY, "anthropic": "sk-ant-000000"}
    assert Secrets(tmp_path).get("openai") == KEY


def test_env_switch_skips_a_working_keyring(
    tmp_path: Path, use_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNKEY_NO_KEYRING", "1")
    assert Secrets(tmp_path).set("openai", KEY) == "file"
    assert use_keyring.store == {}
    assert use_keyring.reads == 0
    assert Secrets(tmp_path).get("openai") == KEY


def test_a_broken_backend_falls_back_and_logs_no_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("TURNKEY_NO_KEYRING", raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(BrokenKeyring())
    try:
        with caplog.at_level(logging.DEBUG):
            assert Secrets(tmp_path).set("openai", KEY) == "file"
            assert Secrets(tmp_path).get("openai") == KEY
    finally:
        keyring.set_keyring(previous)
    assert "keyring store failed" in caplog.text
    assert KEY not in caplog.text


def test_unreadable_file_is_ignored(tmp_path: Path, no_keyring: None) -> None:
    (tmp_path / "secrets.json").write_text("{not json")
    assert Secrets(tmp_path).get("openai") is None
    (tmp_path / "secrets.json").write_text(json.dumps({"openai": 5, "ok": "v"}))
    assert Secrets(tmp_path).get("openai") is None
    assert Secrets(tmp_path).get("ok") == "v"


def test_helper_processes_get_no_variable_that_looks_like_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.host import secretless_env

    for name in ("OPENAI_API_KEY", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "TURNKEY_HOME"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = secretless_env()
    assert env["LANG"] == "C.UTF-8"
    hidden = {"OPENAI_API_KEY", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "TURNKEY_HOME"}
    assert not hidden & set(env)
