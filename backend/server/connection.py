"""One client connection: its principal, its ordered outbox, and its per-session marks.

Every frame to the client — responses and events alike — goes through one
outbox drained by one sender task, so the order frames are queued in is the
order the client reads them.  A client that stops reading is dropped once its
outbox passes `MAX_OUTBOX`; it can reconnect and replay from its last seq.
A connection whose token is revoked takes no more frames and closes with
1008 once the frames already queued are sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from backend.server import rpc
from shared import codec
from shared.protocol import Event, Scope

log = logging.getLogger("rpc")

MAX_OUTBOX = 20_000
OWNER_ID = "owner"  # the token_id of backend.json's token; minted ids start with "tok_"
REVOKED = 1008  # WebSocket close code "policy violation"


@dataclass(frozen=True)
class Principal:
    """Who the token says the caller is; nothing in a request can change it."""

    token_id: str
    scopes: frozenset[Scope]

    @property
    def owner(self) -> bool:
        return self.token_id == OWNER_ID


@dataclass(frozen=True)
class _Close:
    code: int
    reason: str


@dataclass
class Reply:
    """A handler's result plus work to do right after the response is queued."""

    result: Any
    after: Callable[[], None] | None = None


class Connection:
    def __init__(self, ws: ServerConnection, principal: Principal) -> None:
        self.ws = ws
        self.principal = principal
        self.initialized = False
        self._outbox: asyncio.Queue[str | _Close | None] = asyncio.Queue()
        self._marks: dict[str, int] = {}
        self._replaying: dict[str, list[Event]] = {}
        self._sender: asyncio.Task[None] | None = None
        self.closed = False
        self.revoked = False

    def start(self) -> None:
        self._sender = asyncio.create_task(self._send_loop(), name="rpc-sender")

    async def stop(self) -> None:
        self.closed = True
        self._outbox.put_nowait(None)
        if self._sender is not None:
            await self._sender

    def can_read(self) -> bool:
        return self.initialized and not self.revoked and "read" in self.principal.scopes

    def revoke(self) -> None:
        """Its token was revoked: no more frames; what is queued (the response to the call
        that revoked it, when it revoked its own token) goes out, then a 1008 close."""
        self.revoked = True
        if not self.closed:
            self.closed = True
            self._outbox.put_nowait(_Close(REVOKED, "token revoked"))

    # --- subscriptions ------------------------------------------------------------

    def subscribed(self, session_id: str) -> bool:
        return session_id in self._marks or session_id in self._replaying

    def begin_replay(self, session_id: str) -> None:
        """From now on live events of the session are held until `end_replay`."""
        self._replaying.setdefault(session_id, [])

    def end_replay(self, session_id: str, mark: int) -> None:
        """Everything up to `mark` was handed over by replay; send the held events above it."""
        held = self._replaying.pop(session_id, [])
        self._marks[session_id] = mark
        for event in held:
            self.deliver(event)

    def follow(self, session_id: str, mark: int = 0) -> None:
        """Subscribes to live events above `mark` (a no-op when already subscribed)."""
        if not self.subscribed(session_id):
            self._marks[session_id] = mark

    def forget(self, session_id: str) -> None:
        self._marks.pop(session_id, None)
        self._replaying.pop(session_id, None)

    def deliver(self, event: Event) -> None:
        sid = event.session_id
        if event.seq is None:
            self.send(rpc.notification("event", event))
            return
        held = self._replaying.get(sid)
        if held is not None:
            held.append(event)
            return
        mark = self._marks.get(sid)
        if mark is None or event.seq <= mark:
            return  # not subscribed, or already handed over by replay
        self._marks[sid] = event.seq
        self.send(rpc.notification("event", event))

    # --- output ----------------------------------------------------------------

    def send(self, frame: dict[str, Any]) -> None:
        if self.closed:
            return
        if self._outbox.qsize() >= MAX_OUTBOX:
            log.warning("dropping a client that stopped reading (%d frames queued)", MAX_OUTBOX)
            self.closed = True
            self._outbox.put_nowait(None)
            asyncio.get_running_loop().create_task(
                self.ws.close(1013, "too far behind; reconnect and replay from your last seq")
            )
            return
        self._outbox.put_nowait(codec.encode(frame))

    async def _send_loop(self) -> None:
        while True:
            text = await self._outbox.get()
            if text is None:
                return
            try:
                if isinstance(text, _Close):
                    await self.ws.close(text.code, text.reason)
                    return
                await self.ws.send(text)
            except ConnectionClosed:
                self.closed = True
                return
