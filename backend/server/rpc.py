"""JSON-RPC 2.0 framing rules, without I/O: frame text in, request or error out."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from backend.errors import InvalidRequest, ParseError, TurnkeyError

RequestId = str | int


@dataclass(frozen=True)
class Request:
    id: RequestId | None  # None: a notification, which gets no response
    method: str
    params: Any  # an object when valid; dispatch refuses anything else after the scope check


class FrameError(Exception):
    """A frame that cannot be dispatched; `id` is the request id when it could be read."""

    def __init__(self, error: TurnkeyError, id: RequestId | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.id = id


MAX_DEPTH = 200  # nesting no request needs; deeper frames are refused with their id


def parse(text: str) -> Request:
    """One frame as a request, or FrameError.  A leading byte order mark is skipped; numbers
    no request needs (an integer of thousands of digits, 1e999) stay as their text, so typed
    params refuse them by field rather than the frame failing; a frame nested deeper than
    MAX_DEPTH is refused with its id, which is read from the frame's top level."""
    text = text.removeprefix("\ufeff")
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise FrameError(InvalidRequest(f"the request is nested more than {MAX_DEPTH} levels "
                                        "deep"), _top_level_id(text))
    try:
        msg = json.loads(text, parse_int=_integer, parse_float=_real, parse_constant=_constant)
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
    # Params that are not an object are refused by dispatch, after the scope check: a
    # token without the method's scope learns nothing about its params.
    return Request(good_id, method, {} if params is None else params)


def _integer(digits: str) -> int | str:
    return int(digits) if len(digits) <= 4000 else digits  # Python refuses over 4,300 digits


def _real(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text  # 1e999 is not a number any field takes


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python's extension, refused


def _outside_strings(text: str) -> Iterator[tuple[int, str, int]]:
    """Each character outside JSON strings (a string's opening quote included) with the
    nesting depth it stands at; no recursion, so any depth is read."""
    depth = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        yield i, ch, depth


def _depth(text: str) -> int:
    """The deepest nesting of objects and arrays."""
    return max((depth for _, _, depth in _outside_strings(text)), default=0)


_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,18})(?=\s*[,}])')


def _top_level_id(text: str) -> RequestId | None:
    """The "id" of a frame too deep to parse, when it is a key of the outermost object."""
    for i, ch, depth in _outside_strings(text):
        if ch == '"' and depth == 1:
            found = _ID.match(text, i)
            if found:
                value = json.loads(found.group(1))
                return value if isinstance(value, str | int) else None
    return None


def success(id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def failure(id: RequestId | None, error: TurnkeyError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": id, "error": body}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
