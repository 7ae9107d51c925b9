"""Dispatch of one frame: initialize-first, scope before params, typed params, error mapping."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from backend.errors import (
    CallerError,
    Forbidden,
    InvalidParams,
    MethodNotFound,
    NotInitialized,
    TurnkeyError,
)
from backend.server import rpc
from backend.server.connection import Connection, Reply
from backend.server.methods import Methods
from shared.codec import ParamsError, convert
from shared.protocol import METHODS

log = logging.getLogger("rpc")


class Dispatcher:
    def __init__(self, methods: Methods) -> None:
        self.methods = methods

    async def handle(self, conn: Connection, text: str) -> None:
        try:
            request = rpc.parse(text)
        except rpc.FrameError as exc:
            log.info("bad frame: %s", exc.error.message)
            conn.send(rpc.failure(exc.id, exc.error))
            return
        after = None
        try:
            result = await self._call(conn, request)
            if isinstance(result, Reply):
                result, after = result.result, result.after
            frame = rpc.success(request.id, result) if request.id is not None else None
        except CallerError as exc:
            log.info("%s -> %d %s", request.method, exc.code, exc.message)
            frame = rpc.failure(request.id, exc)
        except TurnkeyError as exc:
            # The environment's fault (disk, load): logged with an id the user can quote.
            error_id = uuid.uuid4().hex[:12]
            log.warning("%s -> %d %s; error_id=%s", request.method, exc.code, exc.message, error_id)
            data = {**(exc.data or {}), "error_id": error_id}
            frame = rpc.failure(request.id, TurnkeyError(exc.message, data))
            frame["error"]["code"] = exc.code
        except Exception:
            error_id = uuid.uuid4().hex[:12]
            log.exception("%s failed; error_id=%s", request.method, error_id)
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
            raise MethodNotFound(f"method {request.method!r} not found")
        if spec.scope is not None and spec.scope not in conn.principal.scopes:
            raise Forbidden(f"forbidden: this token lacks the {spec.scope!r} scope")
        try:
            params = convert(request.params, spec.params)
        except ParamsError as exc:
            raise InvalidParams(exc.field, f"invalid params: {exc.message}") from None
        return await self.methods.handlers[request.method](conn, params)
