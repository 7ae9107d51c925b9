"""JSON-RPC 2.0 framing rules, without I/O: frame text in, request or error out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.errors import InvalidRequest, ParseError, TurnkeyError
from shared import codec

RequestId = str | int


@dataclass(frozen=True)
class Request:
    id: RequestId | None  # None: a notification, which gets no response
    method: str
    params: dict[str, Any]


class FrameError(Exception):
    """A frame that cannot be dispatched; `id` is the request id when it could be read."""

    def __init__(self, error: TurnkeyError, id: RequestId | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.id = id


def parse(text: str) -> Request:
    try:
        msg = codec.decode(text)
    except (ValueError, RecursionError):
        raise FrameError(ParseError("parse error: the frame is not valid JSON"))
    if isinstance(msg, list):
        raise FrameError(InvalidRequest("batches are not supported; send one request per frame"))
    if not isinstance(msg, dict):
        raise FrameError(InvalidRequest("a request must be a JSON object"))
    has_id = "id" in msg
    rid = msg.get("id")
    valid_id = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    if has_id and not valid_id:
        raise FrameError(InvalidRequest("id must be a string or an integer"))
    good_id = rid if valid_id else None
    if msg.get("jsonrpc") != "2.0":
        raise FrameError(InvalidRequest('"jsonrpc" must be "2.0"'), good_id)
    method = msg.get("method")
    if not isinstance(method, str) or not method:
        raise FrameError(InvalidRequest('"method" must be a non-empty string'), good_id)
    params = msg.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise FrameError(InvalidRequest("params must be an object"), good_id)
    return Request(good_id, method, params)


def success(id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def failure(id: RequestId | None, error: TurnkeyError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": id, "error": body}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
