"""The tokens table: extra principals, kept as a hash of their secret and never the secret."""

from __future__ import annotations

import json

from backend.ids import now
from backend.store.db import Row, Tx
from backend.store.records import Record, record
from shared.literals import ALL_SCOPES, Scope


class TokenRecord(Record, frozen=True):
    """A tokens row, never its hash: `scopes` in the order of ALL_SCOPES; `expires_at` an
    RFC 3339 stamp as `ids.now` writes it, None when it never expires."""

    token_id: str
    label: str
    scopes: tuple[Scope, ...]
    created_at: str
    revoked: bool
    revoked_at: str | None
    expires_at: str | None

    @classmethod
    def from_row(cls, row: Row) -> TokenRecord:
        stored = set(json.loads(row["scopes"]))
        return record(cls, row, scopes=tuple(s for s in ALL_SCOPES if s in stored),
                      revoked=bool(row["revoked"]))

    def live(self, at: str) -> bool:
        """Whether it names its principal at `at` (an `ids.now` stamp): not revoked, not
        expired."""
        return not self.revoked and (self.expires_at is None or self.expires_at > at)


def insert(tx: Tx, token_id: str, token_hash: str, scopes: list[Scope], label: str,
           expires_at: str | None = None) -> TokenRecord:
    tx.execute(
        "INSERT INTO tokens (token_id, token_hash, scopes, label, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (token_id, token_hash, json.dumps(scopes), label, now(), expires_at),
    )
    found = get(tx, token_id)
    assert found is not None
    return found


def active(tx: Tx, token_hash: str) -> TokenRecord | None:
    """The unrevoked, unexpired token whose secret hashes to `token_hash`."""
    r = tx.one("SELECT * FROM tokens WHERE token_hash = ? AND revoked = 0 "
               "AND (expires_at IS NULL OR expires_at > ?)", (token_hash, now()))
    return TokenRecord.from_row(r) if r is not None else None


def get(tx: Tx, token_id: str) -> TokenRecord | None:
    r = tx.one("SELECT * FROM tokens WHERE token_id = ?", (token_id,))
    return TokenRecord.from_row(r) if r is not None else None


def revoke(tx: Tx, token_id: str) -> bool:
    """Marks the token revoked (a no-op when it already is); False when there is no such token."""
    if get(tx, token_id) is None:
        return False
    tx.execute("UPDATE tokens SET revoked = 1, revoked_at = ? WHERE token_id = ? AND revoked = 0",
               (now(), token_id))
    return True


def set_scopes(tx: Tx, token_id: str, scopes: list[Scope]) -> TokenRecord | None:
    """Gives the token these scopes (stored in the order of ALL_SCOPES); None when there is
    no such token."""
    ordered = [s for s in ALL_SCOPES if s in scopes]
    tx.execute("UPDATE tokens SET scopes = ? WHERE token_id = ?", (json.dumps(ordered), token_id))
    return get(tx, token_id)


def listing(tx: Tx) -> list[TokenRecord]:
    """Every minted token, revoked and expired ones included, oldest first."""
    return [TokenRecord.from_row(r) for r in tx.all("SELECT * FROM tokens ORDER BY created_at, token_id")]
