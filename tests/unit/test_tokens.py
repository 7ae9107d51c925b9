"""Minted tokens in the store: only a hash is kept, revoked ones name nobody, and the owner
token is checked first and cannot be revoked."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.errors import InvalidParams, NotFound
from backend.server.auth import OWNER, Authenticator, digest
from backend.store.db import SqliteDatabase
from backend.store.migrations import migrate
from shared.protocol import TokenCreateParams

OWNER_TOKEN = "owner-token-for-tests-0123456789abcdefghijklmn"


@pytest.fixture
async def auth(tmp_path: Path) -> AsyncIterator[Authenticator]:
    db = SqliteDatabase(tmp_path / "state.db")
    await db.open()
    try:
        yield Authenticator(db, OWNER_TOKEN)
    finally:
        await db.close()


def test_a_blank_database_gets_the_tokens_table(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(conn)
    cols = {r[1] for r in conn.execute("PRAGMA table_info(tokens)")}
    assert cols == {"token_id", "token_hash", "scopes", "label", "created_at", "revoked",
                    "revoked_at", "expires_at"}


async def test_a_minted_token_names_its_principal_and_only_its_hash_is_stored(
    auth: Authenticator, tmp_path: Path
) -> None:
    made = await auth.create(TokenCreateParams(scopes=["submit", "read", "read"], label=" ci "))
    assert made.scopes == ["read", "submit"], "repeats dropped, in the protocol's order"
    assert made.label == "ci", "trimmed"
    assert made.token_id.startswith("tok_")
    assert len(made.token) >= 43

    principal = await auth.identify(made.token)
    assert principal is not None
    assert (principal.token_id, principal.scopes) == (made.token_id, frozenset({"read", "submit"}))
    assert not principal.owner
    assert await auth.identify(made.token[:-1]) is None
    assert await auth.identify("") is None
    assert await auth.identify(OWNER_TOKEN) is OWNER

    conn = sqlite3.connect(tmp_path / "state.db")
    [(stored_hash,)] = conn.execute("SELECT token_hash FROM tokens").fetchall()
    assert stored_hash == digest(made.token)
    dump = "\n".join(conn.iterdump())
    assert made.token not in dump


async def test_revoked_tokens_name_nobody_and_stay_listed(auth: Authenticator) -> None:
    heard: list[str] = []
    auth.on_revoke(heard.append)
    keep = await auth.create(TokenCreateParams(scopes=["read"], label="keep"))
    drop = await auth.create(TokenCreateParams(scopes=["admin"], label="drop"))
    await auth.revoke(drop.token_id)
    assert heard == [], "listeners hear of it only when the caller says so (after its response)"
    auth.revoked(drop.token_id)
    assert heard == [drop.token_id]
    await auth.revoke(drop.token_id)  # again: harmless
    assert await auth.identify(drop.token) is None
    assert await auth.identify(keep.token) is not None

    listed = {t.token_id: t for t in await auth.listing()}
    assert list(listed) == [keep.token_id, drop.token_id], "oldest first"
    assert listed[drop.token_id].revoked
    assert listed[drop.token_id].revoked_at
    assert not listed[keep.token_id].revoked
    assert listed[keep.token_id].revoked_at is None
    assert listed[keep.token_id].label == "keep"


async def test_unknown_and_owner_ids_cannot_be_revoked(auth: Authenticator) -> None:
    with pytest.raises(NotFound) as unknown:
        await auth.revoke("tok_nope")
    assert unknown.value.data == {"kind": "token"}
    with pytest.raises(InvalidParams) as owner:
        await auth.revoke("owner")
    assert owner.value.field == "token_id"
    assert await auth.identify(OWNER_TOKEN) is OWNER


@pytest.mark.parametrize("label", ["   ", "two\nlines", "bell\x07"])
async def test_labels_must_be_one_printable_line(auth: Authenticator, label: str) -> None:
    with pytest.raises(InvalidParams) as bad:
        await auth.create(TokenCreateParams(scopes=["read"], label=label))
    assert bad.value.field == "label"
    assert await auth.listing() == []
