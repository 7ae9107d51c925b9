"""Every method of the wire protocol: its request type, its result type, and who may call it.

`METHODS` is the one table.  The backend's dispatcher decodes params with it and
checks scopes against it, the handler table (backend/server/methods.py) must cover
exactly its names, the schema (shared/schema.py) and the methods table in
shared/PROTOCOL.md are generated from it, and clients call through it:

    result = await client.call(SessionCreate(title="notes"))   # -> SessionResult

Each request type is the method's params with the method's name and result bound to
it.  Adding a method: its params and result in shared/protocol/ (its domain's module), a request class
and a `spec(...)` row here, a handler in backend/server/methods.py, then
`python -m shared.schema` to regenerate what is derived from the table.
"""

from __future__ import annotations

import typing
from typing import Any, ClassVar, Generic, TypeVar

import msgspec

from shared import protocol as p
from shared.config import ConfigView

R = TypeVar("R")


class Request(p.Params, Generic[R]):
    """A call of `method` whose answer decodes as R."""

    method: ClassVar[str]


def result_type(request: type[Request[Any]]) -> Any:
    """R of a request class: the type its method answers with."""
    for base in getattr(request, "__orig_bases__", ()):
        if typing.get_origin(base) is Request:
            return typing.get_args(base)[0]
    for parent in request.__mro__[1:]:
        if isinstance(parent, type) and issubclass(parent, Request) and parent is not Request:
            return result_type(parent)
    raise TypeError(f"{request.__name__} does not name its result: subclass Request[Result]")


# --- the requests ---------------------------------------------------------------------


class Initialize(p.InitializeParams, Request[p.InitializeResult]):
    method = "initialize"


class SessionCreate(p.SessionCreateParams, Request[p.SessionResult]):
    method = "session.create"


class SessionList(p.SessionListParams, Request[p.SessionListResult]):
    method = "session.list"


class SessionGet(p.SessionIdParams, Request[p.SessionResult]):
    method = "session.get"


class SessionUpdate(p.SessionUpdateParams, Request[p.SessionResult]):
    method = "session.update"


class SessionDelete(p.SessionDeleteParams, Request[p.DeletedResult]):
    method = "session.delete"


class SessionMessages(p.SessionMessagesParams, Request[p.MessagesResult]):
    method = "session.messages"


class SessionResume(p.SessionSinceParams, Request[p.ResumeResult]):
    method = "session.resume"


class SessionSubscribe(p.SessionSinceParams, Request[p.EventsResult]):
    method = "session.subscribe"


class SessionUnsubscribe(p.SessionIdParams, Request[p.EmptyResult]):
    method = "session.unsubscribe"


class EventsSince(p.EventsSinceParams, Request[p.EventsResult]):
    method = "session.events.since"


class PromptSubmit(p.PromptSubmitParams, Request[p.ReceiptResult]):
    method = "prompt.submit"


class AttachmentUpload(p.AttachmentUploadParams, Request[p.AttachmentUploadResult]):
    method = "attachment.upload"


class AttachmentGet(p.AttachmentGetParams, Request[p.AttachmentGetResult]):
    method = "attachment.get"


class AdmissionGet(p.AdmissionIdParams, Request[p.ReceiptResult]):
    method = "admission.get"


class AdmissionList(p.AdmissionListParams, Request[p.ReceiptsResult]):
    method = "admission.list"


class AdmissionCancel(p.AdmissionIdParams, Request[p.ReceiptResult]):
    method = "admission.cancel"


class AdmissionResolve(p.AdmissionResolveParams, Request[p.ReceiptResult]):
    method = "admission.resolve"


class TurnInterrupt(p.SessionIdParams, Request[p.InterruptResult]):
    method = "turn.interrupt"


class SessionUndo(p.SessionUndoParams, Request[p.UndoResult]):
    method = "session.undo"


class SessionChanges(p.SessionChangesParams, Request[p.ChangesResult]):
    method = "session.changes"


class SessionRegenerate(p.SessionRegenerateParams, Request[p.ReceiptResult]):
    method = "session.regenerate"


class SessionChoose(p.SessionChooseParams, Request[p.ChooseResult]):
    method = "session.choose"


class SessionFork(p.SessionForkParams, Request[p.ForkResult]):
    method = "session.fork"


class SessionCompress(p.SessionCompressParams, Request[p.CompressResult]):
    method = "session.compress"


class SessionUsage(p.SessionIdParams, Request[p.SessionUsageResult]):
    method = "session.usage"


class ApprovalList(p.ApprovalListParams, Request[p.ApprovalsResult]):
    method = "approval.list"


class ApprovalRespond(p.ApprovalRespondParams, Request[p.ApprovalResult]):
    method = "approval.respond"


class ClarifyList(p.ClarifyListParams, Request[p.QuestionsResult]):
    method = "clarify.list"


class ClarifyRespond(p.ClarifyRespondParams, Request[p.QuestionResult]):
    method = "clarify.respond"


class RulesList(p.NoParams, Request[p.RulesResult]):
    method = "rules.list"


class RulesDelete(p.RuleDeleteParams, Request[p.EmptyResult]):
    method = "rules.delete"


class ConfigGet(p.NoParams, Request[ConfigView]):
    """The effective config: defaults filled in, keys only as "set"/"unset"."""

    method = "config.get"


class ConfigSet(p.ConfigSetParams, Request[ConfigView]):
    """Merges `patch` (null deletes a key) and answers the effective config."""

    method = "config.set"


class SecretSet(p.SecretSetParams, Request[p.SecretSetResult]):
    method = "secret.set"


class ProviderTest(p.ProviderTestParams, Request[p.ProviderTestResult]):
    method = "provider.test"


class ProviderList(p.NoParams, Request[p.ProviderListResult]):
    method = "provider.list"


class McpList(p.McpListParams, Request[p.McpListResult]):
    method = "mcp.list"


class McpTest(p.McpTestParams, Request[p.McpTestResult]):
    method = "mcp.test"


class DoorList(p.NoParams, Request[p.DoorListResult]):
    method = "door.list"


class DoorTest(p.DoorTestParams, Request[p.DoorTestResult]):
    """Checks a homeserver and an access token for real (whoami); saves nothing."""

    method = "door.test"


class DoorSet(p.DoorSetParams, Request[p.DoorSetResult]):
    """Creates or updates a door; its token goes to the keyring, never config.toml."""

    method = "door.set"


class TokenCreate(p.TokenCreateParams, Request[p.TokenCreateResult]):
    method = "token.create"


class TokenRevoke(p.TokenIdParams, Request[p.EmptyResult]):
    method = "token.revoke"


class TokenList(p.NoParams, Request[p.TokensResult]):
    method = "token.list"


class TokenUpdate(p.TokenUpdateParams, Request[p.TokenResult]):
    method = "token.update"


class Shutdown(p.NoParams, Request[p.EmptyResult]):
    method = "shutdown"


class BackendStats(p.BackendStatsParams, Request[p.BackendStatsResult]):
    """Event-loop lag and the store writer's lock holds since the backend started."""

    method = "backend.stats"


class BackendList(p.BackendListParams, Request[p.BackendListResult]):
    """The backend processes on this backend's store: host, pid, heartbeat, sessions held."""

    method = "backend.list"


# Scheduled prompts (a prompt submitted later: creating one needs what submitting does).


class ScheduleCreate(p.ScheduleCreateParams, Request[p.ScheduleResult]):
    method = "schedule.create"


class ScheduleList(p.NoParams, Request[p.SchedulesResult]):
    method = "schedule.list"


class ScheduleUpdate(p.ScheduleUpdateParams, Request[p.ScheduleResult]):
    method = "schedule.update"


class ScheduleDelete(p.ScheduleIdParams, Request[p.DeletedResult]):
    method = "schedule.delete"
# --- memory (addition) ---


class MemoryGet(p.NoParams, Request[p.MemoryResult]):
    method = "memory.get"


class MemorySet(p.MemorySetParams, Request[p.MemoryResult]):
    method = "memory.set"


# --- the background review (addition) ---


class ReviewUndo(p.ReviewUndoParams, Request[p.ReviewUndoResult]):
    method = "review.undo"


# --- skills (addition) ---


class SkillList(p.SkillListParams, Request[p.SkillsResult]):
    method = "skill.list"


class SkillGet(p.SkillParams, Request[p.SkillDetail]):
    method = "skill.get"


class SkillSetEnabled(p.SkillEnableParams, Request[p.SkillDetail]):
    method = "skill.set_enabled"


class SkillDelete(p.SkillParams, Request[p.SkillsResult]):
    method = "skill.delete"


# --- the table --------------------------------------------------------------------------


class MethodSpec(msgspec.Struct, frozen=True):
    params: type[Request[Any]]
    scope: p.Scope | None  # None: any connection (initialize)
    # Params whose values must never be logged or echoed in an error (dispatch redacts them).
    secret: tuple[str, ...] = ()
    # String params whose lone surrogates are replaced (U+FFFD) by the handler; in any other
    # string a lone surrogate is invalid params.
    cleaned: tuple[str, ...] = ()
    # Only the owner's token (backend.json) may call it, whatever scopes another token has.
    owner_only: bool = False

    @property
    def name(self) -> str:
        return self.params.method

    @property
    def result(self) -> Any:
        return result_type(self.params)


def _table(*specs: MethodSpec) -> dict[str, MethodSpec]:
    table = {s.name: s for s in specs}
    assert len(table) == len(specs), "a method is listed twice"
    return table


METHODS: dict[str, MethodSpec] = _table(
    MethodSpec(Initialize, None),
    MethodSpec(SessionCreate, "submit"),
    MethodSpec(SessionList, "read"),
    MethodSpec(SessionGet, "read"),
    MethodSpec(SessionUpdate, "submit"),
    MethodSpec(SessionDelete, "admin"),
    MethodSpec(SessionMessages, "read"),
    MethodSpec(SessionResume, "read"),
    MethodSpec(SessionSubscribe, "read"),
    MethodSpec(SessionUnsubscribe, "read"),
    MethodSpec(EventsSince, "read"),
    MethodSpec(PromptSubmit, "submit", cleaned=("text",)),
    # Addition: files sent with a prompt (attachments).
    MethodSpec(AttachmentUpload, "submit"),
    MethodSpec(AttachmentGet, "read"),
    MethodSpec(AdmissionGet, "read"),
    MethodSpec(AdmissionList, "read"),
    MethodSpec(AdmissionCancel, "submit"),
    MethodSpec(AdmissionResolve, "submit"),
    MethodSpec(TurnInterrupt, "submit"),
    MethodSpec(SessionUndo, "submit"),
    MethodSpec(SessionChanges, "read"),
    # Additions: answers to a prompt, and branches (store/answers.py, store/branches.py).
    MethodSpec(SessionRegenerate, "submit"),
    MethodSpec(SessionChoose, "submit"),
    MethodSpec(SessionFork, "submit", cleaned=("text",)),
    MethodSpec(SessionCompress, "submit"),
    MethodSpec(SessionUsage, "read"),
    MethodSpec(ApprovalList, "read"),
    MethodSpec(ApprovalRespond, "approve"),
    # A question is answered by whoever may answer its approvals: what the person chooses steers
    # the turn as a decision does.
    MethodSpec(ClarifyList, "read"),
    MethodSpec(ClarifyRespond, "approve"),
    MethodSpec(RulesList, "read"),
    MethodSpec(RulesDelete, "approve"),
    MethodSpec(ConfigGet, "admin"),
    MethodSpec(ConfigSet, "admin"),
    MethodSpec(SecretSet, "admin", secret=("value",)),
    MethodSpec(ProviderTest, "admin", secret=("api_key",)),
    MethodSpec(ProviderList, "read"),
    MethodSpec(McpList, "read"),
    MethodSpec(McpTest, "admin"),
    # A minted admin token must not mint more: a token handed to a script cannot outlive
    # its revocation through tokens it made.
    MethodSpec(TokenCreate, "admin", owner_only=True),
    MethodSpec(TokenRevoke, "admin"),
    MethodSpec(TokenList, "admin"),
    # Widening a token is minting power: owner only, like token.create.
    MethodSpec(TokenUpdate, "admin", owner_only=True),
    MethodSpec(Shutdown, "admin"),
    # The backend as a whole, not a session: its operator's, like config.get.
    MethodSpec(BackendStats, "admin"),
    # Hosts and pids of every backend on the store: operational, like backend.stats.
    MethodSpec(BackendList, "admin"),
    # A lone surrogate in a schedule's or a notebook's text is refused (-32602, PROTOCOL
    # section 13), never stored as U+FFFD: only a prompt's text is cleaned.
    MethodSpec(ScheduleCreate, "submit"),
    MethodSpec(ScheduleList, "read"),
    MethodSpec(ScheduleUpdate, "submit"),
    MethodSpec(ScheduleDelete, "submit"),
    # The model itself writes memory with its tool in any turn a `submit` token starts, so
    # editing it needs no more than that scope (PROTOCOL.md, memory.set).
    MethodSpec(MemoryGet, "read"),
    MethodSpec(MemorySet, "submit"),
    # It puts back only what a review wrote unasked in a `submit` turn, like memory.set.
    MethodSpec(ReviewUndo, "submit"),
    # The model writes the person's skills in any `submit` turn, so turning one off needs no
    # more; removing a folder (a project's too, without the file approval) needs `admin`.
    MethodSpec(SkillList, "read"),
    MethodSpec(SkillGet, "read"),
    MethodSpec(SkillSetEnabled, "submit"),
    MethodSpec(SkillDelete, "admin"),
    MethodSpec(DoorList, "read"),
    # Like provider.test: a form's token for one request, to the homeserver the form names.
    MethodSpec(DoorTest, "admin", secret=("access_token",)),
    # Like config.set with secret.set: what it changes is a loosening (doors.NAME), checked
    # as config.set checks one.
    MethodSpec(DoorSet, "admin", secret=("access_token",)),
)
