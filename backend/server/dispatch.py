"""Dispatch of one frame: initialize-first, the token still current, scope (and owner-only)
before params, typed params, error mapping.

A call whose connection's token was revoked, expired or given other scopes since the
connection opened is refused (-32003) and never runs; the connection then closes with 1008
after that refusal (`Authenticator.check`, `TokenEnded`).

Params a method marks secret (`secret.set`'s value) never reach a log line or
an error frame: every error of such a call is redacted here, at the one place
errors are logged and sent.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any, Protocol

from backend.errors import (
    CallerError,
    Forbidden,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotInitialized,
    TokenEnded,
    TurnkeyError,
)
from backend.server import rpc
from backend.server.auth import Authenticator
from backend.server.connection import Connection, Reply
from backend.server.gate import Handler
from shared import logs
from shared.codec import ParamsError, convert
from shared.methods import METHODS

log = logging.getLogger("rpc")


class Handlers(Protocol):
    """`Methods`, or the `Gate` in front of it until the backend has built it."""

    @property
    def handlers(self) -> Mapping[str, Handler]: ...


class Dispatcher:
    def __init__(self, methods: Handlers, tokens: Authenticator) -> None:
        self.methods = methods
        self.tokens = tokens

    async def handle(self, conn: Connection, text: str) -> None:
        try:
            request = rpc.parse(text)
        except rpc.FrameError as exc:
            log.info("bad frame: %s", exc.error.message)
            conn.send(rpc.failure(exc.id, exc.error))
            return
        hidden = _secret_values(request)
        after = None
        try:
            result = await self._call(conn, request)
            if isinstance(result, Reply):
                result, after = result.result, result.after
            frame = rpc.success(request.id, result) if request.id is not None else None
        except CallerError as exc:
            _redact_error(exc, hidden)
            _bound_error(exc)
            log.info("%s -> %d %s", shown(request.method), exc.code, exc.message)
            frame = rpc.failure(request.id, exc)
            if isinstance(exc, TokenEnded):
                after = exc.close  # the refusal is queued first, then the 1008 close
        except TurnkeyError as exc:
            # The environment's fault (disk, load): logged with an id the user can quote.
            _redact_error(exc, hidden)
            _bound_error(exc)
            error_id = logs.new_error_id()
            log.warning("%s -> %d %s", shown(request.method), exc.code, exc.message,
                        extra={"error_id": error_id})
            data = {**(exc.data or {}), "error_id": error_id}
            frame = rpc.failure(request.id, TurnkeyError(exc.message, data))
            frame["error"]["code"] = exc.code
        except Exception as exc:
            error_id = logs.new_error_id()
            if hidden:  # the traceback's messages could quote a secret param: redacted text
                trace = _redact("".join(traceback.format_exception(exc)), hidden)
                log.error("%s failed\n%s", shown(request.method), trace.rstrip(),
                          extra={"error_id": error_id})
            else:
                log.error("%s failed", shown(request.method), exc_info=True,
                          extra={"error_id": error_id})
            frame = rpc.failure(
                request.id,
                TurnkeyError(
                    f"internal error; the backend log has details under error_id {error_id}",
                    {"error_id": error_id},
                ),
            )
        if frame is not None and request.id is not None:
            conn.send(frame)
        if after is not None:
            after()

    async def _call(self, conn: Connection, request: rpc.Request) -> Any:
        if not conn.initialized and request.method != "initialize":
            raise NotInitialized("not initialized: the first request must be initialize")
        spec = METHODS.get(request.method)
        if spec is None:
            raise MethodNotFound(f"method {shown(request.method)!r} not found")
        if conn.revoked:
            raise Forbidden("forbidden: this connection's token was revoked")
        # Scopes come from the token as it is now, never from params: on a shared store
        # another backend may have revoked or rescoped it unheard of (a lost signal).
        await self.tokens.check(conn.principal)
        conn.checked_at = time.monotonic()
        if spec.scope is not None and spec.scope not in conn.principal.scopes:
            raise Forbidden(f"forbidden: this token lacks the {spec.scope!r} scope")
        if spec.owner_only and not conn.principal.owner:
            raise Forbidden(f"forbidden: only the owner's token (backend.json) may call "
                            f"{request.method}")
        if not isinstance(request.params, dict):
            raise InvalidRequest("params must be an object")
        try:
            params = convert(request.params, spec.params, cleaned=spec.cleaned)
        except ParamsError as exc:
            known = spec.params.__struct_fields__
            if spec.secret and exc.field.split(".")[0] not in known:
                # An unknown field is named by its key, which a confused client may have
                # made the secret itself: the key is not repeated.
                takes = ", ".join(known)
                raise InvalidParams("", f"invalid params: unknown field (it takes {takes})") from None
            raise InvalidParams(exc.field, f"invalid params: {exc.message}") from None
        return await self.methods.handlers[request.method](conn, params)


def _secret_values(request: rpc.Request) -> list[str]:
    """The request's secret params (METHODS[...].secret) as sent and trimmed, longest first."""
    spec = METHODS.get(request.method)
    values: set[str] = set()
    params = request.params if isinstance(request.params, dict) else {}
    for name in spec.secret if spec else ():
        value = params.get(name)
        if isinstance(value, str):
            values |= {value, value.strip()}
    return sorted(values - {""}, key=len, reverse=True)


MAX_SHOWN = 200  # characters of a caller's text an error or a log line repeats


def shown(text: str) -> str:
    """A caller's text as errors and logs repeat it: bounded, so a megabyte of method name or
    bad value is not echoed whole (nor written whole to a log that rotates)."""
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:MAX_SHOWN]}… ({len(text):,} characters)"


def _bound_error(exc: TurnkeyError) -> None:
    """An error's message and string data, bounded for the reply and the log."""
    if len(exc.message) > 4 * MAX_SHOWN:
        exc.message = shown(exc.message)
        exc.args = (exc.message,)
    if exc.data:
        exc.data = {k: shown(v) if isinstance(v, str) else v for k, v in exc.data.items()}


def _redact(text: str, hidden: list[str]) -> str:
    for value in hidden:
        text = text.replace(value, "***")
    return text


def _redact_error(exc: TurnkeyError, hidden: list[str]) -> None:
    """Removes secret params from an error's message and data before it is logged or sent."""
    if not hidden:
        return
    exc.message = _redact(exc.message, hidden)
    exc.args = (exc.message,)
    if exc.data:
        exc.data = {k: _redact(v, hidden) if isinstance(v, str) else v for k, v in exc.data.items()}
