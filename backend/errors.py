"""The backend's one error tree and its mapping to JSON-RPC codes.

    TurnkeyError
    ├── CallerError              the caller's fault: fix the request
    │   ├── ParseError           -32700 bad JSON
    │   ├── InvalidRequest       -32600 not JSON-RPC 2.0 shaped
    │   ├── MethodNotFound       -32601
    │   ├── InvalidParams        -32602 (data.field)
    │   ├── NotInitialized       -32002
    │   ├── Forbidden            -32003
    │   ├── NotFound             -32004 (data.kind)
    │   ├── SessionBusy          -32009
    │   ├── AdmissionConflict    -32010
    │   ├── AdmissionState       -32012
    │   └── ApprovalClosed       -32013
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

from typing import Any


class TurnkeyError(Exception):
    code = -32603

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class CallerError(TurnkeyError):
    pass


class ParseError(CallerError):
    code = -32700


class InvalidRequest(CallerError):
    code = -32600


class MethodNotFound(CallerError):
    code = -32601


class InvalidParams(CallerError):
    code = -32602

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, {"field": field})
        self.field = field


class NotInitialized(CallerError):
    code = -32002


class Forbidden(CallerError):
    code = -32003


class NotFound(CallerError):
    code = -32004

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"{kind} {ident!r} not found", {"kind": kind})
        self.kind = kind


class SessionBusy(CallerError):
    code = -32009


class AdmissionConflict(CallerError):
    code = -32010


class AdmissionState(CallerError):
    code = -32012


class ApprovalClosed(CallerError):
    """The approval was already decided or expired."""

    code = -32013


class EnvironmentFault(TurnkeyError):
    pass


class StoreUnavailable(EnvironmentFault):
    code = -32603


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
    may do about each kind); `message` is safe to show a user.  `retry_after` is the wait
    the provider asked for, in seconds; `streamed` is True once text reached the client."""

    def __init__(
        self, kind: str, message: str, *, status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.streamed = False
