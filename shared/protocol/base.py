"""The protocol's version, the bounds and base classes every part uses, and the event envelope."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

# The words of shared/literals.py, re-exported: clients read them here.
from shared.literals import ALL_SCOPES as ALL_SCOPES
from shared.literals import SNIPPET_MAX as SNIPPET_MAX
from shared.literals import AdmissionOutcome as AdmissionOutcome
from shared.literals import AdmissionStatus as AdmissionStatus
from shared.literals import ApprovalStatus as ApprovalStatus
from shared.literals import BackendState as BackendState
from shared.literals import DecidedBy as DecidedBy
from shared.literals import Decision as Decision
from shared.literals import MissedPolicy as MissedPolicy
from shared.literals import QuestionStatus as QuestionStatus
from shared.literals import Role as Role
from shared.literals import Scope as Scope
from shared.literals import SessionStatus as SessionStatus
from shared.literals import UsageTask as UsageTask

PROTOCOL_VERSION = 1


NonNegative = Annotated[int, msgspec.Meta(ge=0)]
RequestId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]

# Bounds on strings a caller sets that the backend keeps and sends on: a session's title,
# model and cwd go out in every session.updated broadcast; ids come back in errors and logs.
TITLE_MAX = 200
MODEL_MAX = 200
CWD_MAX = 4096  # PATH_MAX on Linux
ID_MAX = 200
Title = Annotated[str, msgspec.Meta(max_length=TITLE_MAX)]
ModelName = Annotated[str, msgspec.Meta(max_length=MODEL_MAX)]
Folder = Annotated[str, msgspec.Meta(max_length=CWD_MAX)]
Id = Annotated[str, msgspec.Meta(max_length=ID_MAX)]


class Params(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of all params: unknown fields are errors, so typos show."""


class Wire(msgspec.Struct, omit_defaults=True, kw_only=True):
    """Base of results and event data: optional fields are left out when unset."""


class Usage(msgspec.Struct, kw_only=True):
    """Always carries every counter, zeros included."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False


class UsageRow(msgspec.Struct, kw_only=True):
    """One row of the cost ledger: every counter always present."""

    provider: str
    model: str
    task: UsageTask
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float
    estimated: bool


class EventData(Wire):
    """Base of every event's data.  Each subclass is bound to exactly one event name by the
    events table (`EVENTS` in shared/protocol/events.py), so the backend emits an event by
    its struct alone (`backend.wire.emit`), never by a name string or a dict."""


class EventSpec(msgspec.Struct, frozen=True):
    """One row of the events table: an event's name, the struct of its data, and the words
    for that data in PROTOCOL.md's events table (generated from these rows)."""

    name: str
    data: type[EventData]
    doc: str


class Event(Wire):
    """One event notification's params.  `seq` is absent on session-less events; `data` is
    the struct `EVENTS[type]` names, as JSON."""

    session_id: str
    type: str
    ts: str
    data: dict[str, Any]
    seq: int | None = None
    turn_id: str | None = None
    admission_id: str | None = None


class NoParams(Params):
    pass


class DeletedResult(Wire):
    deleted: bool


class EmptyResult(Wire):
    pass
