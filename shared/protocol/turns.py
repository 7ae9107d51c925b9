"""Admissions and turns: a prompt's receipt, its params and results, and the events of a turn."""

from __future__ import annotations

from typing import Literal

import msgspec

from shared.literals import AdmissionOutcome, AdmissionStatus
from shared.protocol.attachments import Attachment, MessageAttachment
from shared.protocol.base import EventData, EventSpec, Id, Params, RequestId, Usage, Wire

TurnStatus = Literal["completed", "failed", "interrupted"]


class Receipt(Wire):
    admission_id: str
    session_id: str
    request_id: str
    status: AdmissionStatus
    duplicate: bool
    created_at: str
    outcome: AdmissionOutcome | None = None
    position: int | None = None
    started_at: str | None = None
    settled_at: str | None = None
    final_text: str | None = None
    failure_reason: str | None = None
    turn_id: str | None = None
    text: str | None = None  # the input as admitted (normalized)
    origin: str | None = None  # addition: "schedule:<schedule_id>" for a scheduled prompt's
    steer: bool = False  # addition: submitted with intent "steer"
    # Addition: `session.regenerate`'s: the prompt (message_id) whose answer it regenerates.
    regenerates: str | None = None
    # Addition: the files sent with the prompt (attachments), in the order given.
    attachments: list[MessageAttachment] | None = None


class PromptSubmitParams(Params):
    session_id: Id
    request_id: RequestId
    text: str
    attachments: list[Attachment] | None = None
    intent: Literal["queue", "interrupt", "steer"] = "queue"


class SessionRegenerateParams(Params):
    session_id: Id
    request_id: RequestId
    message_id: Id | None = None  # the prompt whose answer to regenerate: the last one


class AdmissionIdParams(Params):
    admission_id: Id


class AdmissionListParams(Params):
    session_id: Id
    status: AdmissionStatus | None = None


class AdmissionResolveParams(Params):
    admission_id: Id
    resolution: Literal["interrupted"]


class ReceiptResult(Wire):
    receipt: Receipt


class ReceiptsResult(Wire):
    receipts: list[Receipt]


class InterruptResult(Wire):
    interrupted: bool


class AdmissionEvent(EventData):
    receipt: Receipt


class AdmissionQueued(AdmissionEvent):
    """`admission.queued`: the receipt of a prompt just admitted."""


class AdmissionSettled(AdmissionEvent):
    """`admission.settled`: the receipt of an admission that just settled."""


class TurnStarted(EventData):
    turn_id: str
    admission_id: str
    model: str
    regenerates: str | None = None  # addition: the prompt this turn answers again


class TurnSteered(EventData):
    """Addition: a steer joined the running turn; the model reads `text` at its next call.
    `admission_id` is the steer's own (started now, settled with the turn)."""

    turn_id: str
    admission_id: str
    text: str


class TextDelta(EventData):
    text: str


class MessageComplete(EventData):
    admission_id: str
    turn_id: str
    text: str
    status: TurnStatus
    usage: Usage
    failure_reason: str | None = None  # for a person: what happened and what to do
    failure_detail: str | None = None  # addition: the raw detail behind a provider's failure


class LeaseWaiting(EventData):
    """Addition: the turn waits for another process's lease on this session."""

    turn_id: str
    holder_pid: int
    expires_at: float


class ProviderRetry(EventData):
    attempt: int  # the attempt about to be made: 2 for the first retry
    delay_s: float  # the wait actually applied
    reason: str  # for a person
    provider: str | None = None  # addition: the provider being retried
    detail: str | None = None  # addition: the raw detail (provider, HTTP status, its words)


class ProviderFallback(EventData):
    from_: str = msgspec.field(name="from")
    to: str
    reason: str  # for a person
    detail: str | None = None  # addition: the raw detail (provider, HTTP status, its words)


TURN_EVENTS = (
    EventSpec("admission.queued", AdmissionQueued, "`receipt`"),
    EventSpec("admission.settled", AdmissionSettled, "`receipt`"),
    EventSpec("turn.started", TurnStarted,
              "`turn_id`, `admission_id`, `model`, `regenerates?` (addition: the prompt's "
              "message_id when the turn answers it again, `session.regenerate`: no user row)"),
    EventSpec("turn.steered", TurnSteered,
              "addition: `turn_id`, `admission_id` (the steer's), `text`: a steer joined the "
              "running turn; stored right after the user row that holds it, so a front-end "
              "shows the text at that place in the turn"),
    EventSpec("message.delta", TextDelta,
              "`text`: the next piece of the assistant's answer; pieces may be coalesced"),
    EventSpec("message.complete", MessageComplete,
              "`admission_id`, `turn_id`, `text` (the whole final answer; for an interrupted "
              "turn, what was streamed of its last message), `status` (`completed`, `failed`, "
              "`interrupted`), `failure_reason?` (for people: what happened and what to do), "
              "`failure_detail?` (a provider failure's raw detail), `usage` (the turn's)"),
    EventSpec("lease.waiting", LeaseWaiting, "`turn_id`, `holder_pid`, `expires_at`"),
    EventSpec("provider.retry", ProviderRetry,
              "`attempt` (the attempt about to be made: 2 for the first retry), `delay_s` (the "
              "wait applied), `reason`, `provider`, `detail?`"),
    EventSpec("provider.fallback", ProviderFallback,
              "`from`, `to` (provider names), `reason`, `detail?`"),
)
