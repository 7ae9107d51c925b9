"""The WebSocket listener: HTTP-level auth (Origin, bearer token), each connection's read loop,
and closing the connections of a token that was revoked, expired or given other scopes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import weakref
from collections.abc import Callable
from http import HTTPStatus

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from backend.errors import TurnkeyError
from backend.ids import instant
from backend.server.auth import Authenticator
from backend.server.connection import CLOSE_GRACE_S, Connection, Principal
from backend.server.dispatch import Dispatcher
from backend.server.fanout import Hub
from shared import logs
from shared.errors import CloseCode

log = logging.getLogger("rpc")

PING_INTERVAL_S = 20
PING_TIMEOUT_S = 40  # with the interval: a client silent past ~60 s is dropped
MAX_IN_FLIGHT = 64  # requests one connection may have running at once
RECHECK_S = 5.0  # on a shared store: how often the open connections' tokens are read again


class Listener:
    def __init__(
        self, dispatcher: Dispatcher, hub: Hub, auth: Authenticator,
        allowed_origins: Callable[[], list[str]], max_frame_bytes: int,
    ) -> None:
        self.dispatcher = dispatcher
        self.hub = hub
        self.auth = auth
        self._origins = allowed_origins  # read per request: config.set applies at once
        self._max_frame = max_frame_bytes
        self._server: Server | None = None
        self.connections: set[Connection] = set()
        # Who each accepted upgrade is, from the handshake until its handler takes it over,
        # with the count of token changes heard when its token was looked up.
        self._accepted: weakref.WeakKeyDictionary[ServerConnection, tuple[Principal, int]] = (
            weakref.WeakKeyDictionary())
        # Each token changed while this process runs: its principal now (None: it names
        # nobody) and the count of changes heard when it was told.
        self._changes = 0
        self._latest: dict[str, tuple[Principal | None, int]] = {}
        self._expiries: dict[Connection, asyncio.TimerHandle] = {}
        self._rechecking: asyncio.Task[None] | None = None
        auth.on_change(self._token_changed)

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Listens (wss when `tls` is given); returns the port bound."""
        self._server = await serve(
            self._handle, host, port, process_request=self._authorize, ssl=tls,
            max_size=self._max_frame, ping_interval=PING_INTERVAL_S, ping_timeout=PING_TIMEOUT_S,
            server_header="turnkey",
            # No permessage-deflate: on loopback it only spends CPU on both ends of every frame
            # (it was 3% of a turn's busy time).
            compression=None,
        )
        sock = next(iter(self._server.sockets))
        bound: int = sock.getsockname()[1]
        if self.auth.shared:
            self._rechecking = asyncio.create_task(self._recheck(), name="token-recheck")
        return bound

    async def stop(self) -> None:
        if self._rechecking is not None:
            self._rechecking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rechecking
        if self._server is None:
            return
        self._server.close(close_connections=True)
        try:
            # A close handshake waits for the peer to read; one that stopped reading would
            # hold the shutdown for ever, so what is still open after the grace is aborted.
            await asyncio.wait_for(asyncio.shield(self._server.wait_closed()), CLOSE_GRACE_S)
        except TimeoutError:
            for conn in list(self.connections):
                conn.abort()
            await self._server.wait_closed()

    async def _authorize(self, ws: ServerConnection, request: Request) -> Response | None:
        # Origin first: a browser page must be refused whatever token it carries.
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self._origins():
            return ws.respond(HTTPStatus.FORBIDDEN, "origin not allowed\n")
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        principal = None
        heard = self._changes
        if scheme.lower() == "bearer":
            try:
                principal = await self.auth.identify(token)
            except TurnkeyError as exc:
                log.warning("could not check a token: %s", exc.message)
                return ws.respond(HTTPStatus.SERVICE_UNAVAILABLE, "could not check the token\n")
        if principal is None:
            return ws.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token\n")
        if request.path.split("?")[0] != "/rpc":
            return ws.respond(HTTPStatus.NOT_FOUND, "the endpoint is /rpc\n")
        self._accepted[ws] = (principal, heard)
        return None

    # --- a token's end: its connections close ------------------------------------------

    def _token_changed(self, token_id: str, current: Principal | None) -> None:
        """Closes this process's connections of the token whose principal is not `current`."""
        self._changes += 1
        self._latest[token_id] = (current, self._changes)
        reason = "token revoked or expired" if current is None else "token's scopes changed"
        for conn in list(self.connections):
            if conn.principal.token_id == token_id and conn.principal != current:
                conn.revoke(reason)

    def _changed_since(self, principal: Principal, heard: int) -> bool:
        """Whether a change of its token was heard after it was looked up, that the
        connection holding it must close for (the change missed that connection)."""
        latest = self._latest.get(principal.token_id)
        return latest is not None and latest[1] > heard and latest[0] != principal

    def _expire_at(self, conn: Connection) -> None:
        """Closes the connection when its token expires: every backend does so for its own
        connections, from the token's row, with no signal."""
        expires_at = conn.principal.expires_at
        if expires_at is None:
            return
        delay = max(0.0, instant(expires_at) - time.time())
        self._expiries[conn] = asyncio.get_running_loop().call_later(
            delay, conn.revoke, "token expired")

    async def _recheck(self) -> None:
        """On a shared store, every RECHECK_S, reads the tokens of the open connections that
        made no call for that long (a call checks its own): a connection whose token changed
        closes even if the signal was lost and it makes no call (one that only reads
        events)."""
        while True:
            await asyncio.sleep(RECHECK_S)
            started = time.monotonic()
            idle = [conn for conn in list(self.connections)
                    if not conn.closed and started - conn.checked_at >= RECHECK_S]
            try:
                await self.auth.stale(conn.principal for conn in idle)
            except TurnkeyError as exc:
                log.warning("could not look at the open connections' tokens: %s", exc.message)
                continue
            except Exception:  # our bug: logged, and the next look still happens
                logs.internal(log, "looking at the open connections' tokens failed")
                continue
            for conn in idle:  # those still open hold a current principal
                conn.checked_at = max(conn.checked_at, started)

    # --- a connection -----------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        accepted = self._accepted.pop(ws, None)
        if accepted is None:  # every upgrade passes _authorize first
            await ws.close(CloseCode.INTERNAL, "no principal")
            return
        principal, heard = accepted
        conn = Connection(ws, principal)
        conn.start()
        self.connections.add(conn)
        self._expire_at(conn)
        if self._changed_since(principal, heard):
            conn.revoke("token revoked or changed")
        self.hub.attach(conn)
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        tasks: set[asyncio.Task[None]] = set()
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    await ws.close(CloseCode.UNSUPPORTED_DATA,
                                   "binary frames are not supported; send JSON text")
                    break
                await slots.acquire()
                # Requests run concurrently but start in arrival order, so pipelined
                # submissions are admitted in the order they were sent.
                task = asyncio.create_task(self.dispatcher.handle(conn, message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                task.add_done_callback(lambda _: slots.release())
        except ConnectionClosed:
            pass
        finally:
            self.hub.detach(conn)
            self.connections.discard(conn)
            expiry = self._expiries.pop(conn, None)
            if expiry is not None:
                expiry.cancel()
            if tasks:
                await asyncio.wait(tasks)
            await conn.stop()
