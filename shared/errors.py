"""The contract's error codes (JSON-RPC `error.code`) and WebSocket close codes, one name
each.  The backend raises them (backend/errors.py); front-ends compare against them."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700  # the frame is not JSON
    INVALID_REQUEST = -32600  # not a JSON-RPC 2.0 request
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602  # data.field names the bad parameter
    INTERNAL = -32603  # our bug, or the store could not commit; data.error_id is in the log
    NOT_INITIALIZED = -32002  # call `initialize` first
    FORBIDDEN = -32003  # the token lacks the scope (or it is owner-only), or was revoked/expired/rescoped
    NOT_FOUND = -32004  # data.kind: "session", "admission", "approval", ...
    SESSION_BUSY = -32009  # the session has work; pass force, or wait
    ADMISSION_CONFLICT = -32010  # a request_id reused with different input
    ADMISSION_STATE = -32012  # the admission is not in a state the call applies to
    APPROVAL_CLOSED = -32013  # already decided elsewhere, or expired
    QUESTION_CLOSED = -32014  # a `clarify` question answered otherwise, expired or withdrawn


class CloseCode(IntEnum):
    """Why the backend closed a WebSocket."""

    UNSUPPORTED_DATA = 1003  # a binary frame
    POLICY_VIOLATION = 1008  # the connection's token was revoked, expired or rescoped
    INTERNAL = 1011
    TRY_AGAIN_LATER = 1013  # the client fell too far behind; reconnect and replay
