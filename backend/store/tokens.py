"""The tokens table: extra principals, kept as a hash of their secret and never the secret."""

from __future__ import annotations

import json

from backend.ids import now
from backend.store.db import Row, Tx
from shared.protocol import ALL_SCOPES, Scope, TokenInfo


def insert(tx: Tx, token_id: str, token_hash: str, scopes: list[Scope], label: str) -> TokenInfo:
    tx.execute(
        "INSERT INTO tokens (token_id, token_hash, scopes, label, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (token_id, token_hash, json.dumps(scopes), label, now()),
    )
    found = get(tx, token_id)
    assert found is not None
    return found


def active(tx: Tx, token_hash: str) -> TokenInfo | None:
    """The unrevoked token whose secret hashes to `token_hash`."""
    r = tx.one("SELECT * FROM tokens WHERE token_hash = ? AND revoked = 0", (token_hash,))
    return _info(r) if r is not None else None


def get(tx: Tx, token_id: str) -> TokenInfo | None:
    r = tx.one("SELECT * FROM tokens WHERE token_id = ?", (token_id,))
    return _info(r) if r is not None else None


def revoke(tx: Tx, token_id: str) -> bool:
    """Marks the token revoked (a no-op when it already is); False when there is no such token."""
    if get(tx, token_id) is None:
        return False
    tx.execute("UPDATE tokens SET revoked = 1, revoked_at = ? WHERE token_id = ? AND revoked = 0",
               (now(), token_id))
    return True


def listing(tx: Tx) -> list[TokenInfo]:
    """Every minted token, revoked ones included, oldest first."""
    return [_info(r) for r in tx.all("SELECT * FROM tokens ORDER BY created_at, token_id")]


def _info(r: Row) -> TokenInfo:
    stored = set(json.loads(r["scopes"]))
    return TokenInfo(
        token_id=r["token_id"], label=r["label"], scopes=[s for s in ALL_SCOPES if s in stored],
        created_at=r["created_at"], revoked=bool(r["revoked"]), revoked_at=r["revoked_at"],
    )
