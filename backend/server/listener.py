"""The WebSocket listener: HTTP-level auth (Origin, bearer token) and each connection's read loop."""

from __future__ import annotations

import asyncio
import logging
import ssl
import weakref
from collections.abc import Callable
from http import HTTPStatus

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from backend.errors import TurnkeyError
from backend.server.auth import Authenticator
from backend.server.connection import CLOSE_GRACE_S, Connection, Principal
from backend.server.dispatch import Dispatcher
from backend.server.fanout import Hub
from shared.errors import CloseCode

log = logging.getLogger("rpc")

PING_INTERVAL_S = 20
PING_TIMEOUT_S = 40  # with the interval: a client silent past ~60 s is dropped
MAX_IN_FLIGHT = 64  # requests one connection may have running at once


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
        # Who each accepted upgrade is, from the handshake until its handler takes it over.
        self._accepted: weakref.WeakKeyDictionary[ServerConnection, Principal] = (
            weakref.WeakKeyDictionary())
        self._revoked: set[str] = set()  # token ids revoked while this process runs
        auth.on_revoke(self._token_revoked)

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
        return bound

    async def stop(self) -> None:
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
        self._accepted[ws] = principal
        return None

    def _token_revoked(self, token_id: str) -> None:
        self._revoked.add(token_id)
        for conn in list(self.connections):
            if conn.principal.token_id == token_id:
                conn.revoke()

    async def _handle(self, ws: ServerConnection) -> None:
        principal = self._accepted.pop(ws, None)
        if principal is None:  # every upgrade passes _authorize first
            await ws.close(CloseCode.INTERNAL, "no principal")
            return
        conn = Connection(ws, principal)
        conn.start()
        self.connections.add(conn)
        # Revoked between the handshake's lookup and now: the revocation missed this one.
        if principal.token_id in self._revoked:
            conn.revoke()
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
            if tasks:
                await asyncio.wait(tasks)
            await conn.stop()
