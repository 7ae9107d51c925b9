"""The async client every Turnkey front-end uses: find, connect, call, follow, reconnect, replay.

It finds the backend through DIR/backend.json (re-read on every reconnect, so
a restarted backend with a new port and token is found again), keeps the
highest seq seen per subscribed session, and after a reconnect re-subscribes
with `since_seq` so each event is delivered exactly once.  If the backend says
the replay is truncated, a `client.resync` event tells the front-end to reload
that session with `session.resume`.

Calls and events are typed: `await client.call(SessionCreate(title="x"))` answers a
`SessionResult`, and each handler receives an `Incoming` whose `data` is the struct
`EVENTS` names for its type (or, for the client's own events, `ClientState` and
`Resync`).  `call("method", {...})` with a plain dict stays for tests that probe the
wire itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import msgspec
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus

from shared import codec
from shared import protocol as p
from shared.errors import ErrorCode
from shared.launcher import BackendInfo as BackendInfo  # re-exported: front-ends import them here
from shared.launcher import BackendNotFound as BackendNotFound
from shared.methods import Initialize, Request, SessionSubscribe, result_type
from shared.remote import RemoteTarget, fingerprint_of_der
from shared.ws_client import ClientConnection, connect

log = logging.getLogger("client")

R = TypeVar("R")

RESYNC = "client.resync"
STATE = "client.state"
BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)

ConnectionState = Literal["disconnected", "connected", "reconnecting", "closed"]


class ClientState(p.Wire):
    """`client.state`: the connection dropped ("reconnecting") or is back ("connected")."""

    state: ConnectionState
    # While reconnecting: why the backend refused the last attempt ("" when it merely did
    # not answer), from `refusal()`: a certificate that is not the pinned one, a token it
    # no longer knows.
    refused: str = ""


class Resync(p.Wire):
    """`client.resync`: events of this session were lost beyond replay; reload it with
    `session.resume`.  `latest_seq` is where following resumes."""

    latest_seq: int


class UnknownEvent(p.Wire):
    """An event type this client does not know (a newer backend's), kept as sent."""

    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Incoming:
    """One event as a front-end receives it: `data` is the struct `EVENTS[type]` names, or
    ClientState / Resync for the client's own, or UnknownEvent."""

    type: str
    session_id: str
    data: p.Wire
    seq: int | None = None
    turn_id: str | None = None
    admission_id: str | None = None
    ts: str = ""

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> Incoming:
        """Raises msgspec.ValidationError when a known event's data does not match its type."""
        env = msgspec.convert(raw, p.Event)
        kind = p.EVENTS.get(env.type)
        data: p.Wire = UnknownEvent(data=env.data) if kind is None else msgspec.convert(env.data, kind)
        return cls(env.type, env.session_id, data, env.seq, env.turn_id, env.admission_id, env.ts)


class RpcError(Exception):
    """An error response from the backend, with the contract's code.  `refused` makes the
    subclass of its code (`except InvalidParams as exc: exc.field`); a code the client
    does not know stays an RpcError."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data or {}

    @staticmethod
    def refused(code: int, message: str, data: dict[str, Any] | None = None) -> RpcError:
        """The error for `code`: its own class when the contract names the code."""
        return _BY_CODE.get(code, RpcError)(code, message, data)

    def _text(self, key: str) -> str:
        value = self.data.get(key)
        return value if isinstance(value, str) else ""


class InvalidParams(RpcError):
    """-32602: a parameter is wrong; `field` names it ("" when the backend did not say)."""

    @property
    def field(self) -> str:
        return self._text("field")


class Forbidden(RpcError):
    """-32003: the token lacks the method's scope, or the change is the owner's to make;
    `fields` names the settings a refused `config.set` would have loosened."""

    @property
    def fields(self) -> list[str]:
        value = self.data.get("fields")
        return [str(f) for f in value] if isinstance(value, list) else []


class NotFound(RpcError):
    """-32004: no such thing; `kind` says what was looked for ("session", "approval", ...)."""

    @property
    def kind(self) -> str:
        return self._text("kind")


class InternalError(RpcError):
    """-32603: the backend's bug, or the store could not commit; `error_id` finds it in the
    backend's log."""

    @property
    def error_id(self) -> str:
        return self._text("error_id")


class SessionBusy(RpcError):
    """-32009: the session has work; pass force, or wait."""


class AdmissionConflict(RpcError):
    """-32010: a request_id was reused with different input."""


class AdmissionState(RpcError):
    """-32012: the admission is not in a state the call applies to."""


class ApprovalClosed(RpcError):
    """-32013: the approval was already decided elsewhere, or expired."""


_BY_CODE: dict[int, type[RpcError]] = {
    ErrorCode.INVALID_PARAMS: InvalidParams, ErrorCode.FORBIDDEN: Forbidden,
    ErrorCode.NOT_FOUND: NotFound, ErrorCode.INTERNAL: InternalError,
    ErrorCode.SESSION_BUSY: SessionBusy, ErrorCode.ADMISSION_CONFLICT: AdmissionConflict,
    ErrorCode.ADMISSION_STATE: AdmissionState, ErrorCode.APPROVAL_CLOSED: ApprovalClosed,
}


class ConnectionLost(Exception):
    """The connection dropped before the answer came; the call may or may not have run."""


EventHandler = Callable[[Incoming], None]


class Client:
    def __init__(self, data_dir: Path, name: str = "turnkey", version: str = "0.1.0",
                 reconnect: bool = True, remote: RemoteTarget | None = None) -> None:
        """`remote`: a backend on another machine (a parsed connection string) instead of
        the one backend.json in `data_dir` names."""
        self.data_dir = data_dir
        self.remote = remote
        self.name = name
        self.version = version
        self.reconnect = reconnect
        self.watermarks: dict[str, int] = {}
        self.handlers: list[EventHandler] = []
        self.state: ConnectionState = "disconnected"
        self.refused = ""  # why the last reconnect attempt was refused ("" if none was)
        self.server: p.InitializeResult | None = None
        self._ws: ClientConnection | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._closing = False
        self._connected = asyncio.Event()

    # --- lifecycle -------------------------------------------------------------

    async def connect(self) -> None:
        """Connects once; raises BackendNotFound when nothing answers."""
        await self._open()
        self._mark_connected()
        self._reader = asyncio.create_task(self._read_loop(), name="client-reader")

    async def close(self) -> None:
        self._closing = True
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self.state = "closed"

    def target(self) -> RemoteTarget:
        """Where to connect: the remote backend, else the folder's (re-read each time)."""
        if self.remote is not None:
            return self.remote
        info = BackendInfo.read(self.data_dir)
        if info is None:
            raise BackendNotFound(f"no backend.json in {self.data_dir}")
        return RemoteTarget(info.local_host, info.port, info.token, info.tls_fingerprint)

    async def _open(self) -> None:
        target = self.target()
        where = f"{target.host}:{target.port}" if self.remote else f"port {target.port}"
        try:
            ws = await connect(
                target.url, proxy=None, max_size=None, open_timeout=5,
                additional_headers={"Authorization": f"Bearer {target.token}"},
                **pinned(target.fingerprint),
            )
        except CertificateMismatch:
            raise
        except InvalidStatus as exc:
            raise BackendNotFound(f"the backend on {where} refused the connection: "
                                  f"{_refusal(exc)}") from exc
        except (OSError, TimeoutError, ConnectionClosed, InvalidMessage) as exc:
            raise BackendNotFound(f"the backend on {where} does not answer: {exc}") from exc
        self._ws = ws
        try:
            self.server = await self._request(ws, Initialize(
                client=p.ClientInfo(name=self.name, version=self.version),
                protocol=p.PROTOCOL_VERSION,
            ))
        except BaseException:  # no half-made connection left open behind a failed attempt
            self._ws = None
            await ws.close()
            raise

    async def _request(self, ws: ClientConnection, request: Request[R]) -> R:
        """A call on a connection whose reader is not running yet (the handshake)."""
        rid = next(self._ids)
        await ws.send(codec.encode({"jsonrpc": "2.0", "id": rid, "method": request.method,
                                    "params": msgspec.to_builtins(request)}))
        while True:
            msg = codec.decode(await ws.recv())
            if msg.get("id") == rid:
                return _typed(request, _result(msg))
            if msg.get("method") == "event":
                self._on_event(msg["params"])

    # --- calls -------------------------------------------------------------------

    @overload
    async def call(self, request: Request[R], *, timeout: float | None = 60.0) -> R: ...

    @overload
    async def call(self, request: str, params: dict[str, Any] | None = None, *,
                   timeout: float | None = 60.0) -> Any: ...

    async def call(self, request: Request[Any] | str, params: dict[str, Any] | None = None, *,
                   timeout: float | None = 60.0) -> Any:
        """Sends a request and waits for its result; raises RpcError or ConnectionLost.

        A `Request` answers its typed result; a method name with a params dict (for tests
        of the wire itself) answers the decoded JSON."""
        if isinstance(request, str):
            return await self._send(request, params or {}, timeout)
        return _typed(request, await self._send(request.method, msgspec.to_builtins(request), timeout))

    async def _send(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        await asyncio.wait_for(self._connected.wait(), timeout)
        ws = self._ws
        assert ws is not None
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await ws.send(codec.encode(
                {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            ))
            return await asyncio.wait_for(fut, timeout)
        except ConnectionClosed as exc:
            raise ConnectionLost(str(exc)) from exc
        finally:
            self._pending.pop(rid, None)

    async def subscribe(self, session_id: str, since_seq: int | None = None) -> p.EventsResult:
        """Follows a session from `since_seq` (default: its watermark, or from now)."""
        mark = since_seq if since_seq is not None else self.watermarks.get(session_id)
        result = await self.call(SessionSubscribe(session_id=session_id, since_seq=mark))
        self._apply_replay(session_id, mark, result)
        return result

    def follow(self, session_id: str, seq: int = 0) -> None:
        """Records a subscription the backend made implicitly (create, submit)."""
        self.watermarks.setdefault(session_id, seq)

    # --- events ------------------------------------------------------------------

    def _apply_replay(self, session_id: str, mark: int | None, result: p.EventsResult) -> None:
        if result.truncated:
            self.watermarks[session_id] = result.latest_seq
            self._dispatch(Incoming(RESYNC, session_id, Resync(latest_seq=result.latest_seq)))
            return
        self.watermarks.setdefault(session_id, mark or 0)
        for event in result.events:
            self._on_event(msgspec.to_builtins(event))
        if mark is None:
            self.watermarks[session_id] = max(self.watermarks[session_id], result.latest_seq)

    def _on_event(self, raw: dict[str, Any]) -> None:
        try:
            event = Incoming.decode(raw)
        except msgspec.ValidationError as exc:
            log.warning("dropped an event that does not match the protocol: %s", exc)
            return
        if event.seq is not None:
            sid = event.session_id
            if event.seq <= self.watermarks.get(sid, 0):
                return  # already seen: a replay overlapping live delivery
            self.watermarks[sid] = event.seq
        self._dispatch(event)

    def _dispatch(self, event: Incoming) -> None:
        for handler in list(self.handlers):
            try:
                handler(event)
            except Exception:
                log.exception("event handler failed")

    async def _read_loop(self) -> None:
        while True:
            ws = self._ws
            assert ws is not None
            try:
                async for raw in ws:
                    self._on_frame(codec.decode(raw))
            except ConnectionClosed:
                pass
            self._connected.clear()
            for fut in self._pending.values():
                if not fut.done():
                    _fail(fut, ConnectionLost("the connection to the backend dropped"))
            if self._closing or not self.reconnect:
                self.state = "closed"
                return
            await self._reconnect()

    def _on_frame(self, msg: dict[str, Any]) -> None:
        if msg.get("method") == "event":
            self._on_event(msg["params"])
            return
        fut = self._pending.get(msg.get("id"))  # type: ignore[arg-type]
        if fut is not None and not fut.done():
            try:
                fut.set_result(_result(msg))
            except RpcError as exc:
                _fail(fut, exc)

    async def _reconnect(self) -> None:
        self.state = "reconnecting"
        self._dispatch(Incoming(STATE, "", ClientState(state=self.state)))
        for attempt in itertools.count():
            if self._closing:
                return
            await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
            try:
                await self._open()
            except (BackendNotFound, ConnectionClosed, OSError) as exc:
                log.debug("reconnect attempt %d failed: %s", attempt + 1, exc)
                self._note_refusal(refusal(exc))
                continue
            break
        self.refused = ""
        ws = self._ws
        assert ws is not None
        # Replay each followed session from its watermark before reading live frames.
        for sid, mark in list(self.watermarks.items()):
            try:
                result = await self._request(ws, SessionSubscribe(session_id=sid, since_seq=mark))
            except RpcError as exc:
                if exc.code == ErrorCode.NOT_FOUND:
                    self.watermarks.pop(sid, None)
                    continue
                raise
            self._apply_replay(sid, mark, result)
        # Only now may calls go out: until here this task alone reads the connection.
        self._mark_connected()
        self._dispatch(Incoming(STATE, "", ClientState(state=self.state)))

    def _note_refusal(self, refused: str) -> None:
        """Tells the handlers when the reason the backend turns us away changes (a front-end
        says "refused: wrong certificate" rather than "reconnecting" forever)."""
        if refused != self.refused:
            self.refused = refused
            self._dispatch(Incoming(STATE, "", ClientState(state=self.state, refused=refused)))

    def _mark_connected(self) -> None:
        self.state = "connected"
        self._connected.set()


class CertificateMismatch(BackendNotFound):
    """The server's certificate is not the pinned one: someone may be in between.  Nothing
    was sent: the token stays secret."""


class _PinnedConnection(ClientConnection):
    """A connection that checks the server's certificate against `pin` as soon as TLS is up,
    before the opening handshake sends the bearer token."""

    pin = ""
    mismatch: CertificateMismatch | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        tls = transport.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        shown = fingerprint_of_der(der) if der else "none"
        if shown != self.pin:
            self.mismatch = CertificateMismatch(
                f"the backend's TLS certificate is not the one this connection string pins "
                f"(it shows SHA-256 {shown}, the string says {self.pin}); not connecting. If the "
                "backend made a new certificate, pair again with `turnkey token create` on it.")
            self.transport.abort()

    async def handshake(self, *args: Any, **kwargs: Any) -> None:
        if self.mismatch is not None:
            raise self.mismatch
        await super().handshake(*args, **kwargs)


def pinned(fingerprint: str) -> dict[str, Any]:
    """`connect` options for a wss URL whose certificate must have this SHA-256 (none for
    plain ws).  No certificate authority is consulted: the pin alone decides."""
    if not fingerprint:
        return {}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # the pin names the certificate; its names do not matter
    context.verify_mode = ssl.CERT_NONE
    factory = type("PinnedConnection", (_PinnedConnection,), {"pin": fingerprint})
    return {"ssl": context, "create_connection": factory}


def refusal(exc: BaseException) -> str:
    """Why a backend turned a connection away, in a few words, or "" when it did not answer
    at all (down, restarting, a network in between: worth retrying as it is)."""
    if isinstance(exc, CertificateMismatch):
        return "wrong certificate"
    cause = exc if isinstance(exc, InvalidStatus) else exc.__cause__
    if isinstance(cause, InvalidStatus):
        code = cause.response.status_code
        return "token revoked or unknown" if code == 401 else f"refused (HTTP {code})"
    return ""


def _refusal(exc: InvalidStatus) -> str:
    """What the backend said when it refused the upgrade (its body is one line of ours)."""
    body = exc.response.body.decode(errors="replace").strip() if exc.response.body else ""
    return f"HTTP {exc.response.status_code}" + (f": {body[:200]}" if body else "")


def _typed(request: Request[R], raw: Any) -> R:
    """The result decoded as the request's method answers; a result that does not match
    is the backend breaking the contract, reported as such."""
    try:
        decoded: R = msgspec.convert(raw, result_type(type(request)))
    except msgspec.ValidationError as exc:
        raise InternalError(ErrorCode.INTERNAL,
                            f"{request.method} answered outside the protocol: {exc}") from None
    return decoded


def _result(msg: dict[str, Any]) -> Any:
    if "error" in msg:
        err = msg["error"]
        data = err.get("data")
        raise RpcError.refused(int(err.get("code", 0)), str(err.get("message", "")),
                               data if isinstance(data, dict) else None)
    return msg.get("result")


def _fail(fut: asyncio.Future[Any], exc: Exception) -> None:
    """Fails a pending call.  Its caller may be cancelled before it resumes (the app quitting
    as the connection drops): asyncio.wait_for then leaves the exception unread, and the
    loop would log it as an error, so it is marked read here; an awaiting caller still gets it."""
    fut.set_exception(exc)
    fut.exception()
