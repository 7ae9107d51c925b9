"""Remote pairings kept across runs: the token only in the keyring, the rest in desktop.json
beside the window layout, and nothing kept at all where no keyring works."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail

from desktop import pairings
from desktop.pairings import Pairing
from tests.fakes.memory_keyring import MemoryKeyring

TOKEN = "tok-SECRET-0123456789abcdef"
BOX = Pairing("bk_0011", "build-box", "10.0.0.5", 8765, "ab" * 32)


@pytest.fixture
def ring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    monkeypatch.delenv("TURNKEY_NO_KEYRING", raising=False)
    previous = keyring.get_keyring()
    memory = MemoryKeyring()
    keyring.set_keyring(memory)
    yield memory
    keyring.set_keyring(previous)


def test_the_token_goes_to_the_keyring_and_the_rest_beside_the_layout(
    tmp_path: Path, ring: MemoryKeyring,
) -> None:
    pairings.write_settings(tmp_path, {"grouping": "folder"})
    assert pairings.remember(tmp_path, BOX, TOKEN)
    assert ring.store == {("turnkey", "backend-bk_0011"): TOKEN}
    text = (tmp_path / "desktop.json").read_text()
    assert TOKEN not in text
    assert json.loads(text)["grouping"] == "folder", "the layout stays"
    assert pairings.load(tmp_path) == [BOX]
    assert pairings.token_of(BOX) == TOKEN
    assert BOX.where == "build-box (10.0.0.5)"
    assert BOX.target(TOKEN).connection_string().startswith("turnkey://10.0.0.5:8765?token=")

    pairings.write_settings(tmp_path, {"grouping": "day"})  # the layout saved later
    assert pairings.load(tmp_path) == [BOX], "the pairings stay"


def test_pairing_again_replaces_and_forgetting_removes_both_halves(
    tmp_path: Path, ring: MemoryKeyring,
) -> None:
    other = Pairing("bk_0022", "", "gpu.lan", 9000, "cd" * 32)
    assert pairings.remember(tmp_path, BOX, TOKEN)
    assert pairings.remember(tmp_path, other, "other-token")
    renamed = BOX._replace(label="ci")
    assert pairings.remember(tmp_path, renamed, "new-token")
    assert pairings.load(tmp_path) == [other, renamed]
    assert other.where == "gpu.lan"
    assert other.name == "gpu.lan"
    pairings.forget(tmp_path, BOX.key)
    assert pairings.load(tmp_path) == [other]
    assert ring.store == {("turnkey", "backend-bk_0022"): "other-token"}
    pairings.forget(tmp_path, "bk_gone")  # nothing there: nothing to do, no error
    assert pairings.load(tmp_path) == [other]


def test_without_a_keyring_nothing_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TURNKEY_NO_KEYRING", raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # type: ignore[no-untyped-call]  # (no annotations)
    try:
        assert not pairings.remember(tmp_path, BOX, TOKEN)
    finally:
        keyring.set_keyring(previous)
    assert not (tmp_path / "desktop.json").exists(), "no pairing without its token"
    monkeypatch.setenv("TURNKEY_NO_KEYRING", "1")
    assert not pairings.remember(tmp_path, BOX, TOKEN)
    assert not any(TOKEN in f.read_text() for f in tmp_path.rglob("*") if f.is_file())


def test_a_malformed_entry_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "desktop.json").write_text(json.dumps({"backends": [
        {"key": "bk_1", "host": "a", "port": "not a port"}, {"label": "no host"},
        {"key": "bk_2", "label": "b", "host": "b.lan", "port": 1, "fingerprint": ""}]}))
    assert pairings.load(tmp_path) == [Pairing("bk_2", "b", "b.lan", 1, "")]
    (tmp_path / "desktop.json").write_text("{ not json")
    assert pairings.load(tmp_path) == []
