"""One client connection: its principal, its ordered outbox, and its per-session marks.

Every frame to the client — responses and events alike — goes through one
outbox drained by one sender task, so the order frames are queued in is the
order the client reads them.  A client that stops reading is dropped once its
outbox passes `MAX_OUTBOX` frames or `MAX_OUTBOX_BYTES`; it can reconnect and
replay from its last seq.  Dropping frees it at once: the outbox is emptied,
and since a close frame cannot reach a peer that does not read (websockets'
close waits for the write buffer to drain, and so does its keepalive), the TCP
connection is aborted unless the close handshake ends within `CLOSE_GRACE_S`.
A connection whose token is revoked, expires or gets other scopes takes no more frames and
closes with 1008 once the frames already queued are sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from backend.server import memory, rpc
from shared import codec
from shared.errors import CloseCode
from shared.protocol import Event, Scope

log = logging.getLogger("rpc")

MAX_OUTBOX = 20_000
OWNER_ID = "owner"  # the token_id of backend.json's token; minted ids start with "tok_"
REVOKED = CloseCode.POLICY_VIOLATION
MAX_OUTBOX_BYTES = 64 * 1024 * 1024  # one frame bigger than this still goes out alone
CLOSE_GRACE_S = 2.0


@dataclass(frozen=True)
class Principal:
    """Who the token says the caller is; nothing in a request can change it.  `expires_at`:
    when the token stops working, an `ids.now` stamp (None: never)."""

    token_id: str
    scopes: frozenset[Scope]
    expires_at: str | None = None

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
        self._queued_bytes = 0  # characters, which is bytes for the ASCII most frames are
        self._marks: dict[str, int] = {}
        self._replaying: dict[str, list[Event]] = {}
        self._sender: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None  # a drop's close, held while it runs
        self.closed = False
        self.revoked = False
        # When its principal was last found current (monotonic): at the handshake's lookup,
        # then at each call's check (dispatch.py).
        self.checked_at = time.monotonic()

    def start(self) -> None:
        self._sender = asyncio.create_task(self._send_loop(), name="rpc-sender")

    async def stop(self) -> None:
        self.closed = True
        self._outbox.put_nowait(None)
        if self._sender is not None:
            await self._sender

    def can_read(self) -> bool:
        return self.initialized and not self.revoked and "read" in self.principal.scopes

    def revoke(self, reason: str = "token revoked") -> None:
        """Its token was revoked, expired or given other scopes: no more frames; what is
        queued (the response to the call that revoked it, when it revoked its own token; the
        refusal of a call that found it changed) goes out, then a 1008 close."""
        self.revoked = True
        if not self.closed:
            self.closed = True
            self._outbox.put_nowait(_Close(REVOKED, reason))

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
        text = codec.encode(frame)
        queued = self._outbox.qsize()
        if queued >= MAX_OUTBOX or (queued and self._queued_bytes + len(text) > MAX_OUTBOX_BYTES):
            self.drop(f"dropping a client that stopped reading ({queued} frames, "
                      f"{self._queued_bytes} bytes queued)")
            return
        self._queued_bytes += len(text)
        self._outbox.put_nowait(text)

    def drop(self, why: str) -> None:
        """Ends the connection now, freeing what was queued for it, without waiting for a
        peer that does not read (see the module docstring)."""
        if self.closed:
            return
        log.warning("%s", why)
        self.closed = True
        while not self._outbox.empty():
            self._outbox.get_nowait()
        self._queued_bytes = 0
        self._outbox.put_nowait(None)
        self._closer = asyncio.get_running_loop().create_task(self._close_or_abort())

    async def _close_or_abort(self) -> None:
        try:
            if self.ws.transport.get_write_buffer_size() == 0:  # a close frame can go out
                await asyncio.wait_for(
                    self.ws.close(CloseCode.TRY_AGAIN_LATER,
                                  "too far behind; reconnect and replay from your last seq"),
                    CLOSE_GRACE_S,
                )
        except TimeoutError:
            pass
        finally:
            self.ws.transport.abort()  # a no-op once the handshake closed it
            memory.give_back()  # the outbox and the transport's buffer are free by now

    def abort(self) -> None:
        """Drops the TCP connection at once (shutdown, for a peer the close did not reach)."""
        self.closed = True
        self.ws.transport.abort()

    async def _send_loop(self) -> None:
        while True:
            text = await self._outbox.get()
            if text is None:
                return
            try:
                if isinstance(text, _Close):
                    await self.ws.close(text.code, text.reason)
                    return
                self._queued_bytes -= len(text)
                await self.ws.send(text)
            except ConnectionClosed:
                self.closed = True
                return
