"""Bearer tokens: which principal a token names; minting, rescoping and revoking the extra
ones; and telling every backend when a token's open connections must close.

The owner token is the one in backend.json, made afresh at every start and
held only in memory here; it has every scope.  Other tokens are minted by
`token.create`: a random secret shown once to its caller, of which the
tokens table keeps only the SHA-256.  A presented token is compared with the
owner's in constant time, then hashed and looked up (a lookup by hash tells a
timing observer nothing about any secret).

A connection keeps the principal its token named when it opened.  When the token is
revoked, expires or gets other scopes, its connections close (1008), on every backend:

- listeners registered with `on_change` hear of a change made here after it is
  committed (`changed`), and close their connections whose principal is not the
  token's current one;
- other backends on a shared PostgreSQL store are sent a signal naming the token (its id
  only) and re-read it (`on_signal`);
- since a signal can be lost, `check` refuses a call whose connection's principal is no
  longer current: on a shared store it reads the token again on every call; on SQLite
  (one backend, which makes every change itself) only expiry can happen unheard of, and
  the connection's own expiry time tells it.  A listener also closes each connection
  when its token expires (`Listener`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any

from backend import wire
from backend.errors import InvalidParams, NotFound, StoreUnavailable, TokenEnded
from backend.ids import new_id, now, stamp
from backend.server.connection import OWNER_ID, Principal
from backend.store import tokens
from backend.store.db import POSTGRESQL, Database, Tx
from backend.store.tokens import TokenRecord
from shared import protocol as p
from shared.codec import clean_text

log = logging.getLogger("rpc")

MAX_TOKEN_CHARS = 512  # longer is no token of ours: not even hashed
OWNER = Principal(OWNER_ID, frozenset(p.ALL_SCOPES))
TOKEN_SIGNAL = "token"  # {"kind": "token", "token_id": ...}: re-read it, close what is stale

OnChange = Callable[[str, Principal | None], None]  # (token_id, its principal now)


def digest(secret: str) -> str:
    """What the tokens table stores of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def principal_of(found: TokenRecord | None, at: str) -> Principal | None:
    """The principal a tokens row names at `at` (an `ids.now` stamp); None when it names
    nobody (missing, revoked or expired)."""
    if found is None or not found.live(at):
        return None
    return Principal(found.token_id, frozenset(found.scopes), found.expires_at)


class Authenticator:
    def __init__(self, db: Database, owner_token: str) -> None:
        self.db = db
        self._owner = owner_token.encode()
        self._listeners: list[OnChange] = []
        # Only on a shared store can another process change a token behind this one's back.
        self.shared = db.dialect == POSTGRESQL
        self._rereads: set[asyncio.Task[None]] = set()

    async def identify(self, token: str) -> Principal | None:
        """The principal `token` names, or None when it names none (unknown, revoked or
        expired)."""
        if hmac.compare_digest(token.encode(), self._owner):
            return OWNER
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        found = await self.db.read(lambda tx: tokens.active(tx, digest(token)))
        return principal_of(found, now())

    # --- the methods ----------------------------------------------------------------

    async def create(self, params: p.TokenCreateParams) -> p.TokenCreateResult:
        label = clean_text(params.label).strip()
        if not label:
            raise InvalidParams("label", "label is empty (surrounding whitespace is trimmed)")
        if any(ord(c) < 32 or ord(c) == 127 for c in label):
            raise InvalidParams("label", "label holds a control character (a line break?)")
        scopes = [s for s in p.ALL_SCOPES if s in params.scopes]
        secret = secrets.token_urlsafe(32)
        token_id = new_id("tok")
        expires_at = None
        if params.expires_in_s is not None:
            expires_at = stamp(time.time() + params.expires_in_s)

        def job(tx: Tx) -> TokenRecord:
            return tokens.insert(tx, token_id, digest(secret), scopes, label, expires_at)

        info = await self.db.write(job)
        log.info("token %s created with scopes %s%s", token_id, ",".join(scopes),
                 f", expiring at {expires_at}" if expires_at else "")
        return p.TokenCreateResult(token_id=token_id, token=secret, scopes=list(info.scopes),
                                   label=info.label, expires_at=info.expires_at)

    async def revoke(self, token_id: str) -> None:
        """Marks the token revoked and tells the other backends; the caller then calls
        `changed(token_id, None)` to tell this one's listeners (after its own response is
        queued, when a connection revokes its own token)."""
        if token_id == OWNER_ID:
            raise InvalidParams("token_id", "the owner token cannot be revoked; it is replaced "
                                            "each time the backend starts")
        if not await self.db.write(lambda tx: tokens.revoke(tx, token_id)):
            raise NotFound("token", token_id)
        log.info("token %s revoked", token_id)
        await self._announce(token_id)

    async def update(self, params: p.TokenUpdateParams) -> tuple[p.TokenInfo, Principal | None]:
        """Gives the token new scopes and, when they differ, tells the other backends;
        returns it as `token.list` shows it and its principal now, which the caller passes
        to `changed` once its response is queued."""
        if params.token_id == OWNER_ID:
            raise InvalidParams("token_id", "the owner token always has every scope")
        scopes = [s for s in p.ALL_SCOPES if s in params.scopes]

        def job(tx: Tx) -> tuple[TokenRecord, bool]:
            found = tokens.get(tx, params.token_id)
            if found is None:
                raise NotFound("token", params.token_id)
            at = now()
            if not found.live(at):
                gone = "revoked" if found.revoked else f"expired at {found.expires_at}"
                raise InvalidParams("token_id", f"token {params.token_id} is {gone}: its scopes "
                                                "no longer matter; mint a new one with "
                                                "token.create")
            if list(found.scopes) == scopes:
                return found, False
            updated = tokens.set_scopes(tx, params.token_id, scopes)
            assert updated is not None
            return updated, True

        found, moved = await self.db.write(job)
        if moved:
            log.info("token %s now has scopes %s", found.token_id, ",".join(found.scopes))
            await self._announce(found.token_id)
        return wire.token(found), principal_of(found, now())

    async def listing(self) -> list[p.TokenInfo]:
        return [wire.token(r) for r in await self.db.read(tokens.listing)]

    # --- telling the connections ----------------------------------------------------

    def on_change(self, listener: OnChange) -> None:
        """`listener(token_id, current)` hears that the token's connections whose principal
        is not `current` (None: all of them) must close."""
        self._listeners.append(listener)

    def changed(self, token_id: str, current: Principal | None) -> None:
        for listener in self._listeners:
            listener(token_id, current)

    async def _announce(self, token_id: str) -> None:
        """Tells the other backends on a shared store to re-read the token.  Its change is
        committed already: if the signal cannot be sent, they find out on the token's next
        call (`check`) or their next look at their connections (`stale`)."""
        try:
            await self.db.signal({"kind": TOKEN_SIGNAL, "token_id": token_id})
        except StoreUnavailable as exc:
            log.warning("could not tell the other backends that token %s changed (%s); they "
                        "find out at its next call", token_id, exc.message)

    def on_signal(self, data: dict[str, Any]) -> None:
        """Another backend changed a token: read it again, then tell the listeners."""
        token_id = data.get("token_id")
        if not isinstance(token_id, str):
            log.warning("ignored a token signal without a token_id")
            return
        task = asyncio.get_running_loop().create_task(self._reread(token_id))
        self._rereads.add(task)
        task.add_done_callback(self._rereads.discard)

    async def _reread(self, token_id: str) -> None:
        try:
            current = (await self.current([token_id]))[token_id]
        except StoreUnavailable as exc:
            # Cannot tell what it is now: its connections close; they reconnect when it works.
            log.warning("could not read token %s again (%s); closing its connections",
                        token_id, exc.message)
            current = None
        self.changed(token_id, current)

    # --- checking a connection's principal ------------------------------------------

    async def _rows(self, token_ids: Iterable[str]) -> dict[str, TokenRecord | None]:
        wanted = sorted(set(token_ids))
        found = await self.db.read(lambda tx: [tokens.get(tx, t) for t in wanted])
        return dict(zip(wanted, found, strict=True))

    async def current(self, token_ids: Iterable[str]) -> dict[str, Principal | None]:
        """The principal each minted token names now, read in one transaction."""
        at = now()
        return {t: principal_of(r, at) for t, r in (await self._rows(token_ids)).items()}

    async def check(self, principal: Principal) -> None:
        """Raises TokenEnded when `principal` is no longer what its token names (see the
        module's docstring for when the store is read); its `close` then closes the token's
        stale connections here."""
        if principal.owner:
            return
        token_id = principal.token_id
        at = now()
        if principal.expires_at is not None and principal.expires_at <= at:
            raise TokenEnded(_ended(principal, None, at), lambda: self.changed(token_id, None))
        if not self.shared:
            return
        found = (await self._rows([token_id]))[token_id]
        current = principal_of(found, at)
        if current != principal:
            raise TokenEnded(_ended(principal, found, at),
                             lambda: self.changed(token_id, current))

    async def stale(self, principals: Iterable[Principal]) -> None:
        """Tells the listeners of each token among `principals` whose principal changed: a
        look at the open connections that needs no signal (on a shared store, where one
        can be lost)."""
        held: dict[str, set[Principal]] = {}
        for q in principals:
            if not q.owner:
                held.setdefault(q.token_id, set()).add(q)
        if not held:
            return
        for token_id, current in (await self.current(held)).items():
            if held[token_id] - {current}:
                self.changed(token_id, current)


def _ended(was: Principal, found: TokenRecord | None, at: str) -> str:
    """Why a call of a connection that holds `was` is refused (the token is now `found`, at
    `at`), and what to do."""
    closes = "; the connection closes."
    if found is None and was.expires_at is not None and was.expires_at <= at:
        return (f"forbidden: this connection's token expired at {was.expires_at}{closes} "
                "Ask the backend's owner for a new token")
    if found is None:
        return f"forbidden: this connection's token no longer exists{closes}"
    if found.revoked:
        return (f"forbidden: this connection's token was revoked{closes} Ask the backend's "
                "owner for a new token")
    if not found.live(at):
        return (f"forbidden: this connection's token expired at {found.expires_at}{closes} "
                "Ask the backend's owner for a new token")
    scopes = ", ".join(found.scopes)
    return (f"forbidden: this connection's token now has other scopes ({scopes}){closes} "
            "Reconnect to use them")
