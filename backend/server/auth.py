"""Bearer tokens: which principal a token names, and minting and revoking the extra ones.

The owner token is the one in backend.json, made afresh at every start and
held only in memory here; it has every scope.  Other tokens are minted by
`token.create`: a random secret shown once to its caller, of which the
tokens table keeps only the SHA-256.  A presented token is compared with the
owner's in constant time, then hashed and looked up (a lookup by hash tells a
timing observer nothing about any secret).  Listeners registered with
`on_revoke` hear of each revocation after it is committed, so open
connections of a revoked token can be closed at once.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable

from backend import wire
from backend.errors import InvalidParams, NotFound
from backend.ids import new_id
from backend.server.connection import OWNER_ID, Principal
from backend.store import tokens
from backend.store.db import Database, Tx
from backend.store.tokens import TokenRecord
from shared import protocol as p
from shared.codec import clean_text

log = logging.getLogger("rpc")

MAX_TOKEN_CHARS = 512  # longer is no token of ours: not even hashed
OWNER = Principal(OWNER_ID, frozenset(p.ALL_SCOPES))


def digest(secret: str) -> str:
    """What the tokens table stores of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


class Authenticator:
    def __init__(self, db: Database, owner_token: str) -> None:
        self.db = db
        self._owner = owner_token.encode()
        self._on_revoke: list[Callable[[str], None]] = []

    async def identify(self, token: str) -> Principal | None:
        """The principal `token` names, or None when it names none (unknown or revoked)."""
        if hmac.compare_digest(token.encode(), self._owner):
            return OWNER
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        found = await self.db.read(lambda tx: tokens.active(tx, digest(token)))
        if found is None:
            return None
        return Principal(found.token_id, frozenset(found.scopes))

    async def create(self, params: p.TokenCreateParams) -> p.TokenCreateResult:
        label = clean_text(params.label).strip()
        if not label:
            raise InvalidParams("label", "label is empty (surrounding whitespace is trimmed)")
        if any(ord(c) < 32 or ord(c) == 127 for c in label):
            raise InvalidParams("label", "label holds a control character (a line break?)")
        scopes = [s for s in p.ALL_SCOPES if s in params.scopes]
        secret = secrets.token_urlsafe(32)
        token_id = new_id("tok")

        def job(tx: Tx) -> TokenRecord:
            return tokens.insert(tx, token_id, digest(secret), scopes, label)

        info = await self.db.write(job)
        log.info("token %s created with scopes %s", token_id, ",".join(scopes))
        return p.TokenCreateResult(token_id=token_id, token=secret, scopes=list(info.scopes),
                                   label=info.label)

    async def revoke(self, token_id: str) -> None:
        """Marks the token revoked; the caller then calls `revoked` to tell the listeners
        (after its own response is queued, when a connection revokes its own token)."""
        if token_id == OWNER_ID:
            raise InvalidParams("token_id", "the owner token cannot be revoked; it is replaced "
                                            "each time the backend starts")
        if not await self.db.write(lambda tx: tokens.revoke(tx, token_id)):
            raise NotFound("token", token_id)
        log.info("token %s revoked", token_id)

    def revoked(self, token_id: str) -> None:
        for listener in self._on_revoke:
            listener(token_id)

    def on_revoke(self, listener: Callable[[str], None]) -> None:
        self._on_revoke.append(listener)

    async def listing(self) -> list[p.TokenInfo]:
        return [wire.token(r) for r in await self.db.read(tokens.listing)]
