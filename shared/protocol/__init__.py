"""Typed definitions of every method, result and event of wire protocol version 1.

The backend decodes params with these types and encodes results and events
from them; the client uses the same types; `shared/schema.py` derives the
shipped JSON Schema from them.  Adding a method means adding its params and
result here and its request and row in `shared/methods.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

# The words of shared/literals.py, re-exported: clients read them here.
from shared.literals import ALL_SCOPES as ALL_SCOPES
from shared.literals import SNIPPET_MAX as SNIPPET_MAX
from shared.literals import AdmissionOutcome as AdmissionOutcome
from shared.literals import AdmissionStatus as AdmissionStatus
from shared.literals import ApprovalStatus as ApprovalStatus
from shared.literals import DecidedBy as DecidedBy
from shared.literals import Decision as Decision
from shared.literals import MissedPolicy as MissedPolicy
from shared.literals import Role as Role
from shared.literals import Scope as Scope
from shared.literals import SessionStatus as SessionStatus
from shared.literals import UsageTask as UsageTask

PROTOCOL_VERSION = 1

TurnStatus = Literal["completed", "failed", "interrupted"]

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


# --- shared objects -------------------------------------------------------


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


class Session(Wire):
    session_id: str
    title: str
    cwd: str
    model: str
    created_at: str
    updated_at: str
    status: SessionStatus
    message_count: int
    usage: Usage
    parent_session_id: str | None = None
    child_session_id: str | None = None
    latest_seq: int = 0
    # Addition: a sub-agent's session names the session and the `delegate` call that made it.
    delegated_from: str | None = None
    delegated_call_id: str | None = None
    # Addition: words for people when the folder is the home folder or / (or holds the home
    # folder), where the sandbox protects none of their files (`shared/folders.py`).
    folder_warning: str | None = None


class SearchMatch(Wire):
    """Where a `session.list` query matched one listed session.

    `message_id`: the session's best-matching message (by bm25), or null when only the
    title matched; `snippet` is then the title.  `snippet` is plain text, never markup:
    about a dozen words around the match, runs of whitespace and control characters made
    one space, at most 160 characters (SNIPPET_MAX), `…` where it was cut.  `highlights`:
    the matched words as [start, end) offsets into `snippet`, counted in Unicode code
    points (as Python indexes a str, not UTF-16 units), ascending, not overlapping.
    """

    session_id: str
    message_id: str | None
    snippet: str
    highlights: list[tuple[int, int]]


class ToolCall(Wire):
    call_id: str
    name: str
    arguments: dict[str, Any]
    arguments_raw: str | None = None


class Message(Wire):
    message_id: str
    session_id: str
    role: Role
    content: str
    compacted: bool
    created_at: str
    turn_id: str | None = None
    tool_calls: list[ToolCall] | None = None
    call_id: str | None = None
    tool_name: str | None = None
    status: str | None = None
    note_kind: str | None = None
    meta: dict[str, Any] | None = None


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


ToolStatus = Literal["ok", "error", "denied", "skipped", "interrupted", "unknown"]


class Approval(Wire):
    approval_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    summary: str
    reason: str
    status: ApprovalStatus
    created_at: str
    expires_at: str
    decision: Decision | None = None
    decided_at: str | None = None  # addition: when it stopped being pending
    decided_by: DecidedBy | None = None  # addition: who closed it (absent while pending)


class Rule(Wire):
    rule_id: str
    tool: str
    pattern: str
    created_at: str


class Event(Wire):
    """One event notification's params.  `seq` is absent on session-less events."""

    session_id: str
    type: str
    ts: str
    data: dict[str, Any]
    seq: int | None = None
    turn_id: str | None = None
    admission_id: str | None = None


class ClientInfo(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    version: str


class ServerInfo(Wire):
    name: str
    version: str


class Principal(Wire):
    token_id: str
    scopes: list[Scope]


class Attachment(Params):
    path: str


# --- params ----------------------------------------------------------------


class NoParams(Params):
    pass


class InitializeParams(Params):
    client: ClientInfo
    protocol: int


class SessionCreateParams(Params):
    title: Title | None = None
    cwd: Folder | None = None
    model: ModelName | None = None


MAX_SEARCH_QUERY = 1000  # characters of a session search; no NUL (SQLite's text ends there)


class SessionListParams(Params):
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50
    cursor: Annotated[str, msgspec.Meta(max_length=1000)] | None = None
    query: Annotated[str, msgspec.Meta(max_length=MAX_SEARCH_QUERY, pattern=r"^[^\x00]*$")] \
        | None = None
    # Addition: sub-agents' sessions are left out unless asked for: all of them
    # (`include_delegated`), or the ones a session's delegate calls made (`delegated_from`).
    include_delegated: bool = False
    delegated_from: Id | None = None


class SessionIdParams(Params):
    session_id: Id


class SessionUpdateParams(Params):
    session_id: Id
    title: Title | None = None
    model: ModelName | None = None


class SessionDeleteParams(Params):
    session_id: Id
    force: bool = False


class SessionMessagesParams(Params):
    session_id: Id
    before_id: Id | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100


class SessionSinceParams(Params):
    session_id: Id
    since_seq: NonNegative | None = None


class EventsSinceParams(Params):
    session_id: Id
    since_seq: NonNegative
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 1000


class PromptSubmitParams(Params):
    session_id: Id
    request_id: RequestId
    text: str
    attachments: list[Attachment] | None = None
    intent: Literal["queue", "interrupt", "steer"] = "queue"


class AdmissionIdParams(Params):
    admission_id: Id


class AdmissionListParams(Params):
    session_id: Id
    status: AdmissionStatus | None = None


class AdmissionResolveParams(Params):
    admission_id: Id
    resolution: Literal["interrupted"]


class ApprovalListParams(Params):
    session_id: Id | None = None


class ApprovalRespondParams(Params):
    approval_id: Id
    decision: Decision


class RuleDeleteParams(Params):
    rule_id: Id


class SessionUndoParams(Params):
    session_id: Id
    turn_id: Id | None = None


class ConfigSetParams(Params):
    patch: dict[str, Any]


SecretName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class SecretSetParams(Params):
    """`value` is trimmed of surrounding whitespace, then must be 1 byte to 8 KiB (UTF-8)."""

    name: SecretName
    value: str


class ProviderTestParams(Params):
    """`provider`: a [providers.NAME] of config; default: what turns use first.

    Additions, to test a settings form before it is saved: `provider_config` is a provider
    table as in `config.set {patch: {providers: {NAME: ...}}}` (merged over NAME's saved table
    when there is one, null deleting a key; validated the same way, errors naming
    `provider_config.FIELD`), and NAME may then be a provider not saved yet.  `api_key` is a key
    used for this one request only: never stored, logged or echoed (a secret param, like
    `secret.set`'s value).  Either needs `provider`.  Nothing is saved."""

    provider: Id | None = None
    provider_config: dict[str, Any] | None = None
    api_key: str | None = None


MAX_TOKEN_LABEL = 100


class TokenCreateParams(Params):
    """`scopes`: a non-empty subset of the four (repeats are ignored); `label`: a name for
    people, 1-100 characters, trimmed of surrounding whitespace."""

    scopes: Annotated[list[Scope], msgspec.Meta(min_length=1)]
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOKEN_LABEL)]


class TokenIdParams(Params):
    token_id: str


# --- results ---------------------------------------------------------------


class ProviderSummary(Wire):
    """What turns will use.  `offline_default`: nothing is configured and the small bundled
    model answers, so a front-end should say so."""

    configured: bool
    name: str | None = None
    model: str | None = None
    kind: str | None = None
    offline_default: bool = False


class SandboxSummary(Wire):
    """How terminal commands run.  `active` false says why in `reason`."""

    active: bool
    kind: str  # "bubblewrap", or "none"
    network: bool
    reason: str | None = None


McpState = Literal["stopped", "starting", "ready", "failed", "disabled"]
McpApproval = Literal["ask", "trusted"]


class McpToolInfo(Wire):
    """Addition: one tool of an MCP server.  `name` is the server's own; `model_name` is
    what the model calls (`mcp__SERVER__TOOL`); `approval` is the effective one; `enabled`
    false: switched off in config (`tools.NAME.enabled`), not offered to the model."""

    name: str
    model_name: str
    description: str = ""
    approval: McpApproval = "ask"
    input_schema: dict[str, Any] | None = None
    enabled: bool = True


class McpServerStatus(Wire):
    """Addition: a configured MCP server (`[mcp.servers.NAME]`) and where it is.  `error`
    says why it is `failed` (its last words on stderr included); `tools` is absent until it
    has listed them once."""

    name: str
    transport: Literal["stdio", "http"]
    state: McpState
    enabled: bool = True
    error: str | None = None
    tools: list[McpToolInfo] | None = None
    restarts: int = 0  # starts after the first, since the backend started
    sandboxed: bool = False


class Capabilities(Wire):
    methods: list[str]
    events: list[str]
    provider: ProviderSummary
    sandbox: SandboxSummary
    mcp: list[McpServerStatus] = []  # addition: the configured MCP servers, without their tools


class InitializeResult(Wire):
    server: ServerInfo
    protocol: int
    epoch: int
    principal: Principal
    capabilities: Capabilities


class SessionResult(Wire):
    session: Session


class SessionListResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """`next_cursor` is always present: null on the last page.  With a query, `matches`
    has one SearchMatch per listed session, in the order of `sessions`; without one (or
    when nothing matched) it is left out."""

    sessions: list[Session]
    next_cursor: str | None
    matches: list[SearchMatch] = msgspec.field(default_factory=list)


class DeletedResult(Wire):
    deleted: bool


class MessagesResult(Wire):
    messages: list[Message]
    has_more: bool


class EventsResult(Wire):
    events: list[Event]
    latest_seq: int
    truncated: bool


class ResumeResult(Wire):
    session: Session
    status: SessionStatus
    messages: list[Message]
    has_more: bool
    latest_seq: int
    events: list[Event]
    truncated: bool
    pending_approvals: list[Approval]
    queue: list[Receipt]
    active_turn: ActiveTurn | None = None


class ActiveTurn(Wire):
    """The running turn, with the text its current assistant message has streamed so far."""

    turn_id: str
    admission_id: str
    text: str


class ReceiptResult(Wire):
    receipt: Receipt


class ReceiptsResult(Wire):
    receipts: list[Receipt]


class SessionUsageResult(Wire):
    usage: Usage
    rows: list[UsageRow]


class InterruptResult(Wire):
    interrupted: bool


class EmptyResult(Wire):
    pass


class ApprovalsResult(Wire):
    approvals: list[Approval]


class ApprovalResult(Wire):
    approval: Approval


class RulesResult(Wire):
    rules: list[Rule]


class SessionCompressParams(Params):
    session_id: Id
    focus: str | None = None  # what the summary should keep in view, in the user's words


class CompressResult(Wire):
    compressed: bool
    before_tokens: int
    after_tokens: int
    session_id: str  # the session the conversation continues in
    reason: str | None = None  # why nothing was compressed, when `compressed` is false


class UndoResult(Wire):
    restored: list[str]
    turn_id: str | None = None


class SecretSetResult(Wire):
    """`warning` (an addition) is present when the key went to the plain-text file."""

    stored: Literal["keyring", "file"]
    warning: str | None = None


class ProviderFailure(Wire):
    kind: str  # a ProviderError kind (providers/errors.py), or "timeout"
    message: str  # for a person: what happened and what to do
    detail: str | None = None  # addition: the raw detail (provider, HTTP status, its words)


class McpListParams(Params):
    """Addition.  `name`: one server only (an unknown name is invalid params)."""

    name: str | None = None


class McpListResult(Wire):
    servers: list[McpServerStatus]


class McpTestParams(Params):
    """Addition: (re)start the server `name` now and list its tools.  `server_config`, a
    table as in `config.set {patch: {mcp: {servers: {NAME: ...}}}}` (merged over the saved
    one, null deleting a key; errors name `server_config.FIELD`), tests a form before it is
    saved, in a throwaway process that is stopped afterwards.  Nothing is saved."""

    name: str
    server_config: dict[str, Any] | None = None


class McpTestResult(Wire):
    ok: bool
    server: McpServerStatus
    latency_ms: int
    error: str | None = None


class ProviderTestResult(Wire):
    """`provider` (an addition) names the provider tested; `error` is present unless ok."""

    ok: bool
    provider: str
    model: str
    latency_ms: int
    error: ProviderFailure | None = None


class TokenCreateResult(Wire):
    """`token` is the secret: it is in this result and nowhere else (only its hash is kept)."""

    token_id: str
    token: str
    scopes: list[Scope]
    label: str


class TokenInfo(msgspec.Struct, kw_only=True):
    """One minted token as `token.list` shows it: never the secret or its hash."""

    token_id: str
    label: str
    scopes: list[Scope]
    created_at: str
    revoked: bool
    revoked_at: str | None


class TokensResult(Wire):
    tokens: list[TokenInfo]


# --- backend.stats --------------------------------------------------------------

STATS_RECENT_MAX = 4096  # recent samples kept per measurement


class BackendStatsParams(Params):
    recent: Annotated[int, msgspec.Meta(ge=0, le=STATS_RECENT_MAX)] = 0  # latest samples wanted


class Threshold(msgspec.Struct, kw_only=True):
    ms: int
    count: int  # samples at least `ms` long


class LagSample(msgspec.Struct, kw_only=True, frozen=True):
    """One wake-up of the loop watch: how late it woke."""

    at: float  # the backend's monotonic clock (seconds) at the wake-up
    ms: float


class GcPause(msgspec.Struct, kw_only=True, frozen=True):
    """One pass of the cyclic garbage collector over generation 1 or 2 (every thread waits)."""

    at: float  # the backend's monotonic clock (seconds) when it ended
    ms: float
    generation: int
    collected: int  # objects it freed


class HoldSample(msgspec.Struct, kw_only=True, frozen=True):
    """One write transaction of the store's writer: BEGIN IMMEDIATE to the end of COMMIT."""

    at: float  # the backend's monotonic clock (seconds) when the transaction ended
    ms: float  # the write lock's hold: the batch's jobs and the durable COMMIT
    jobs: int  # jobs in the batch (group commit)
    slowest: str  # the batch's longest job: its function's module and qualified name
    slowest_ms: float
    commit_ms: float  # the COMMIT alone (WAL append and fsync)
    # The writer thread's CPU time over the hold: `ms` well above `cpu_ms + commit_ms` is
    # waiting, mostly for the GIL (the sqlite3 module releases it around each statement).
    cpu_ms: float


class LoopStats(msgspec.Struct, kw_only=True):
    interval_ms: float  # the watch's tick while a turn runs or is queued (1 s otherwise)
    count: int
    max_ms: float
    mean_ms: float
    over: list[Threshold]
    slowest: list[LagSample]  # since the start, longest first
    recent: list[LagSample]  # the latest `recent` asked for, oldest first


class WriterStats(msgspec.Struct, kw_only=True):
    count: int
    max_ms: float
    mean_ms: float
    over: list[Threshold]
    slowest: list[HoldSample]  # since the start, longest first
    recent: list[HoldSample]  # the latest `recent` asked for, oldest first


class GcStats(msgspec.Struct, kw_only=True):
    count: int
    max_ms: float
    mean_ms: float
    over: list[Threshold]
    slowest: list[GcPause]  # since the start, longest first
    recent: list[GcPause]  # the latest `recent` asked for, oldest first


class BackendStatsResult(msgspec.Struct, kw_only=True):
    """Since the backend started: event-loop lag and the store writer's lock holds."""

    now: float  # the backend's monotonic clock (seconds) as it answered, to age `at` values
    uptime_s: float
    loop: LoopStats
    writer: WriterStats
    gc: GcStats  # generations 1 and 2 only


# --- event data ------------------------------------------------------------


class AdmissionEvent(Wire):
    receipt: Receipt


class TurnStarted(Wire):
    turn_id: str
    admission_id: str
    model: str


class TurnSteered(Wire):
    """Addition: a steer joined the running turn; the model reads `text` at its next call.
    `admission_id` is the steer's own (started now, settled with the turn)."""

    turn_id: str
    admission_id: str
    text: str


class TextDelta(Wire):
    text: str


class MessageComplete(Wire):
    admission_id: str
    turn_id: str
    text: str
    status: TurnStatus
    usage: Usage
    failure_reason: str | None = None  # for a person: what happened and what to do
    failure_detail: str | None = None  # addition: the raw detail behind a provider's failure


class ToolStart(Wire):
    call_id: str
    name: str
    arguments: dict[str, Any]
    summary: str
    arguments_raw: str | None = None


class ToolProgress(Wire):
    """The next chunk of what a running call printed: append `text` in order (see PROTOCOL.md)."""

    call_id: str
    text: str  # raw output, `\r` and escape sequences included; "" for a heartbeat
    elided_bytes: int | None = None  # addition: output skipped before `text`, whose first line says so
    elapsed_s: int | None = None  # addition: on a heartbeat, seconds the call has been running
    # Addition: what the running call announces, e.g. a delegate call's child_session_id.
    meta: dict[str, Any] | None = None


class ToolComplete(Wire):
    call_id: str
    name: str
    status: ToolStatus
    summary: str
    duration_ms: int
    spilled_path: str | None = None
    meta: dict[str, Any] | None = None
    output: str | None = None  # the start of the stored result (at most OUTPUT_PREVIEW_CHARS)
    output_truncated: bool = False


OUTPUT_PREVIEW_CHARS = 4000


class ApprovalEvent(Wire):
    approval: Approval


class LeaseWaiting(Wire):
    """Addition: the turn waits for another process's lease on this session."""

    turn_id: str
    holder_pid: int
    expires_at: float


class ProviderRetry(Wire):
    attempt: int  # the attempt about to be made: 2 for the first retry
    delay_s: float  # the wait actually applied
    reason: str  # for a person
    provider: str | None = None  # addition: the provider being retried
    detail: str | None = None  # addition: the raw detail (provider, HTTP status, its words)


class ProviderFallback(Wire):
    from_: str = msgspec.field(name="from")
    to: str
    reason: str  # for a person
    detail: str | None = None  # addition: the raw detail (provider, HTTP status, its words)


class UsageUpdate(Wire):
    usage: Usage


class SessionEvent(Wire):
    session: Session


class SessionDeletedEvent(Wire):
    session_id: str


class McpServerEvent(Wire):
    """Addition: an MCP server changed state (starting, ready, failed, stopped) or its
    tool list changed; session-less (`session_id` ""), sent to every reader."""

    server: McpServerStatus


class CompressionStart(Wire):
    reason: str
    tokens: int


class CompressionComplete(Wire):
    before_tokens: int
    after_tokens: int
    child_session_id: str | None = None


# --- memory (addition): the agent's two notebooks, backend/tools/memory.py -------------

MemoryTarget = Literal["user", "environment"]


class MemoryFile(Wire):
    """One notebook: its text (entries, one per line), characters used and the limit."""

    text: str
    used: int
    limit: int


class MemoryResult(Wire):
    user: MemoryFile
    environment: MemoryFile


class MemorySetParams(Params):
    """Replaces a whole notebook (the app's editor, `turnkey memory set`); "" clears it.
    Checked as the tool's writes are: cleaned, no secrets, no role tags, within the limit."""

    target: MemoryTarget
    text: Annotated[str, msgspec.Meta(max_length=16_000)]


class MemoryChanged(Wire):
    """Addition: a notebook changed (by the memory tool or memory.set); session-less
    (`session_id` ""), sent to every reader."""

    target: MemoryTarget
    file: MemoryFile


EVENTS: dict[str, type[Wire]] = {
    "admission.queued": AdmissionEvent,
    "admission.settled": AdmissionEvent,
    "turn.started": TurnStarted,
    "turn.steered": TurnSteered,
    "message.delta": TextDelta,
    "message.complete": MessageComplete,
    "tool.start": ToolStart,
    "tool.progress": ToolProgress,
    "tool.complete": ToolComplete,
    "approval.request": ApprovalEvent,
    "approval.resolved": ApprovalEvent,
    "lease.waiting": LeaseWaiting,
    "provider.retry": ProviderRetry,
    "provider.fallback": ProviderFallback,
    "usage.update": UsageUpdate,
    "session.updated": SessionEvent,
    "session.created": SessionEvent,
    "session.deleted": SessionDeletedEvent,
    "compression.start": CompressionStart,
    "compression.complete": CompressionComplete,
    "mcp.server": McpServerEvent,
    "memory.changed": MemoryChanged,
}


# --- scheduled prompts (addition) --------------------------------------------------------

CRON_MAX = 200
SCHEDULE_TEXT_MAX = 64 * 1024  # characters of a scheduled prompt (it is stored and re-sent)
CronText = Annotated[str, msgspec.Meta(max_length=CRON_MAX)]
IsoTime = Annotated[str, msgspec.Meta(max_length=64)]
ZoneName = Annotated[str, msgspec.Meta(max_length=100)]
ScheduleText = Annotated[str, msgspec.Meta(max_length=SCHEDULE_TEXT_MAX)]


class NewSessionSpec(Params):
    """The session each firing starts (as `session.create`'s params)."""

    title: Title | None = None
    cwd: Folder | None = None
    model: ModelName | None = None


class NewSessionSpecWire(Wire):
    title: str | None = None
    cwd: str | None = None
    model: str | None = None


class Schedule(Wire):
    """A prompt submitted later, once (`at`) or repeatedly (`cron`).  Times are UTC RFC 3339;
    `next_fire_at` null: it will not fire again (a one-shot that fired, or disabled)."""

    schedule_id: str
    session_id: str | None
    new_session: NewSessionSpecWire | None
    text: str
    cron: str | None
    at: str | None
    timezone: str
    missed: MissedPolicy
    enabled: bool
    next_fire_at: str | None
    last_fired_at: str | None
    last_admission_id: str | None
    last_session_id: str | None
    created_at: str
    updated_at: str
    disabled_reason: str | None = None  # why the backend disabled it (its session was deleted)


class ScheduleCreateParams(Params):
    """Exactly one of `session_id` and `new_session`; exactly one of `cron` and `at`.
    `timezone`: an IANA name, default the backend's own zone."""

    text: ScheduleText
    session_id: Id | None = None
    new_session: NewSessionSpec | None = None
    cron: CronText | None = None
    at: IsoTime | None = None
    timezone: ZoneName | None = None
    missed: MissedPolicy = "run_once"
    enabled: bool = True


class ScheduleUpdateParams(Params):
    """Fields left out stay as they are.  Giving `cron` clears `at` and the other way round."""

    schedule_id: Id
    text: ScheduleText | None = None
    cron: CronText | None = None
    at: IsoTime | None = None
    timezone: ZoneName | None = None
    missed: MissedPolicy | None = None
    enabled: bool | None = None


class ScheduleIdParams(Params):
    schedule_id: Id


class ScheduleResult(Wire):
    schedule: Schedule


class SchedulesResult(Wire):
    schedules: list[Schedule]


class ScheduleChanged(Wire):
    """Addition: a schedule was created, updated, fired or deleted; session-less
    (`session_id` ""), sent to every reader.  `schedule` is absent when `deleted`; `fired`:
    this change is a firing (its prompt was just admitted in `schedule.last_session_id`)."""

    schedule_id: str
    deleted: bool = False
    schedule: Schedule | None = None
    fired: bool = False


EVENTS["schedule.changed"] = ScheduleChanged  # kept beside its types, out of the table above


# --- messaging doors (addition) ----------------------------------------------------------

DoorState = Literal["starting", "connected", "failing", "stopped"]


class DoorRoom(Wire):
    """A chat room a door serves and the session its messages go to."""

    room_id: str
    session_id: Id
    name: str | None = None  # the room's name on the platform, when it has one


class DoorStatus(Wire):
    """Addition: a configured messaging door (`[doors.NAME]`) and where it is.  `detail` says,
    for people, why it is `failing` (and what to do); `account` is the identity the door
    speaks as on the platform (for Matrix, its user id)."""

    name: str
    platform: str
    state: DoorState
    account: str
    since: float  # when it entered `state`
    detail: str | None = None
    rooms: list[DoorRoom] = []
    allowed_users: list[str] = []
    # The name of the secret (secret.set) holding the door's access token, never its value:
    # a front-end offers to store it there when the door says the token is missing or refused.
    token_secret: str | None = None


class DoorListResult(Wire):
    doors: list[DoorStatus]


class DoorEvent(Wire):
    door: DoorStatus


EVENTS["door.state"] = DoorEvent  # kept beside its types, out of the table above
