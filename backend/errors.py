"""The backend's one error tree and its mapping to JSON-RPC codes.

    TurnkeyError
    ├── CallerError              the caller's fault: fix the request
    │   ├── ParseError           -32700 bad JSON
    │   ├── InvalidRequest       -32600 not JSON-RPC 2.0 shaped
    │   ├── MethodNotFound       -32601
    │   ├── InvalidParams        -32602 (data.field)
    │   ├── NotInitialized       -32002
    │   ├── Forbidden            -32003
    │   │   └── TokenEnded       its token was revoked, expired or rescoped: then 1008
    │   ├── NotFound             -32004 (data.kind)
    │   ├── SessionBusy          -32009
    │   ├── AdmissionConflict    -32010
    │   ├── AdmissionState       -32012
    │   ├── ApprovalClosed       -32013
    │   └── QuestionClosed       -32014
    ├── EnvironmentFault         the world's fault: disk, provider, load
    │   ├── StoreUnavailable     -32603 (store could not commit)
    │   ├── StoreRefused         the database cannot be used at all: the backend exits 2
    │   │   ├── StoreDamaged     not a SQLite database, damaged, or emptied
    │   │   └── StoreTooNew      written by a newer Turnkey
    │   └── ProviderError        a model call failed (becomes a failed turn, not an RPC error)
    └── (anything else)          our bug: -32603 with an error_id into the log

Foreign exceptions (sqlite3, httpx, websockets) are translated where they
are raised, so the layers above see only these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.errors import ErrorCode


class TurnkeyError(Exception):
    code: int = ErrorCode.INTERNAL

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class CallerError(TurnkeyError):
    pass


class ParseError(CallerError):
    code = ErrorCode.PARSE_ERROR


class InvalidRequest(CallerError):
    code = ErrorCode.INVALID_REQUEST


class MethodNotFound(CallerError):
    code = ErrorCode.METHOD_NOT_FOUND


class InvalidParams(CallerError):
    code = ErrorCode.INVALID_PARAMS

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, {"field": field})
        self.field = field


class NotInitialized(CallerError):
    code = ErrorCode.NOT_INITIALIZED


class Forbidden(CallerError):
    code = ErrorCode.FORBIDDEN


class TokenEnded(Forbidden):
    """The connection's token no longer is what it was when the connection opened (revoked,
    expired, or given other scopes): the call is refused, and once the refusal is queued
    `close` closes the token's stale connections (this one included) with 1008."""

    def __init__(self, message: str, close: Callable[[], None]) -> None:
        super().__init__(message)
        self.close = close


class NotFound(CallerError):
    code = ErrorCode.NOT_FOUND

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"{kind} {ident!r} not found", {"kind": kind})
        self.kind = kind


class SessionBusy(CallerError):
    code = ErrorCode.SESSION_BUSY


class AdmissionConflict(CallerError):
    code = ErrorCode.ADMISSION_CONFLICT


class AdmissionState(CallerError):
    code = ErrorCode.ADMISSION_STATE


class ApprovalClosed(CallerError):
    """The approval was already decided or expired."""

    code = ErrorCode.APPROVAL_CLOSED


class QuestionClosed(CallerError):
    """The question was answered otherwise, expired or withdrawn."""

    code = ErrorCode.QUESTION_CLOSED


class EnvironmentFault(TurnkeyError):
    pass


class StoreUnavailable(EnvironmentFault):
    code = ErrorCode.INTERNAL


class LeaseLost(StoreUnavailable):
    """A turn's write was refused: its session's lease names another holder now (it expired
    and another process, maybe another backend on the same database, took it over)."""


class StoreRefused(EnvironmentFault):
    """The database cannot be opened; the backend refuses to start.  The message is one
    line that names the file and says what to do."""


class StoreDamaged(StoreRefused):
    """The file is not a SQLite database, is damaged, or was emptied: never replaced by a
    fresh one, since that would quietly lose every session in it."""


class StoreTooNew(StoreRefused):
    """The database was written by a newer Turnkey; refuse rather than corrupt it."""


class ConfigError(EnvironmentFault):
    """config.toml is invalid; the message names the field."""


class ProviderError(EnvironmentFault):
    """A model call failed. `kind` classifies it (see providers/errors.py for what the turn
    may do about each kind); `message` is the raw detail (the provider's name and what it
    said, never a key), shown a click away.  `words`, when the raiser knows better than the
    kind's default, is what a person is told (providers/errors.py `told`).  `retry_after`
    is the wait the provider asked for, in seconds; `streamed` is True once text reached
    the client."""

    def __init__(
        self, kind: str, message: str, *, status: int | None = None,
        retry_after: float | None = None, words: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.words = words
        self.streamed = False
