"""Minted tokens in the store: only a hash is kept, revoked and expired ones name nobody, new
scopes are a new principal, a connection's principal is checked against the token as it is
now, and the owner token is checked first and cannot be revoked or rescoped."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.errors import InvalidParams, NotFound, TokenEnded
from backend.ids import now
from backend.server.auth import OWNER, Authenticator, digest
from backend.server.connection import Principal
from backend.store.db import SqliteDatabase
from backend.store.migrations import migrate
from shared.protocol import TokenCreateParams, TokenUpdateParams

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
    heard: list[tuple[str, Principal | None]] = []
    auth.on_change(lambda token_id, current: heard.append((token_id, current)))
    keep = await auth.create(TokenCreateParams(scopes=["read"], label="keep"))
    drop = await auth.create(TokenCreateParams(scopes=["admin"], label="drop"))
    await auth.revoke(drop.token_id)
    assert heard == [], "listeners hear of it only when the caller says so (after its response)"
    auth.changed(drop.token_id, None)
    assert heard == [(drop.token_id, None)]
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


async def test_an_expiring_token_names_its_principal_until_then_and_nobody_after(
    auth: Authenticator,
) -> None:
    made = await auth.create(TokenCreateParams(scopes=["read"], label="brief", expires_in_s=1))
    assert made.expires_at is not None
    assert made.expires_at > now()
    principal = await auth.identify(made.token)
    assert principal is not None
    assert principal.expires_at == made.expires_at
    await auth.check(principal)  # still good
    [listed] = await auth.listing()
    assert listed.expires_at == made.expires_at

    heard: list[tuple[str, Principal | None]] = []
    auth.on_change(lambda token_id, current: heard.append((token_id, current)))
    await asyncio.sleep(1.1)
    assert await auth.identify(made.token) is None, "expired: it names nobody"
    with pytest.raises(TokenEnded) as ended:
        await auth.check(principal)
    assert f"expired at {made.expires_at}" in ended.value.message
    assert "new token" in ended.value.message
    ended.value.close()
    assert heard == [(made.token_id, None)], "its connections close"
    assert (await auth.current([made.token_id])) == {made.token_id: None}
    with pytest.raises(InvalidParams, match="expired"):
        await auth.update(TokenUpdateParams(token_id=made.token_id, scopes=["admin"]))


async def test_new_scopes_make_a_new_principal(auth: Authenticator) -> None:
    made = await auth.create(TokenCreateParams(scopes=["read", "submit"], label="narrowed"))
    before = await auth.identify(made.token)
    assert before is not None

    info, current = await auth.update(
        TokenUpdateParams(token_id=made.token_id, scopes=["read", "read"]))
    assert info.scopes == ["read"]
    assert current == Principal(made.token_id, frozenset({"read"}))
    assert await auth.identify(made.token) == current
    assert (await auth.current([made.token_id])) == {made.token_id: current}
    # One backend on SQLite: it made the change, so its connections heard of it (the caller
    # calls `changed`); a call reads no token there.
    await auth.check(before)

    same, unchanged = await auth.update(
        TokenUpdateParams(token_id=made.token_id, scopes=["read"]))
    assert (same.scopes, unchanged) == (["read"], current)
    with pytest.raises(NotFound):
        await auth.update(TokenUpdateParams(token_id="tok_nope", scopes=["read"]))
    with pytest.raises(InvalidParams) as owner:
        await auth.update(TokenUpdateParams(token_id="owner", scopes=["read"]))
    assert owner.value.field == "token_id"
    await auth.revoke(made.token_id)
    with pytest.raises(InvalidParams, match="revoked"):
        await auth.update(TokenUpdateParams(token_id=made.token_id, scopes=["admin"]))


async def test_the_owner_is_always_current(auth: Authenticator) -> None:
    await auth.check(OWNER)
    heard: list[str] = []
    auth.on_change(lambda token_id, current: heard.append(token_id))
    await auth.stale([OWNER])
    assert heard == []
