"""The JSON-RPC methods: each takes typed params and returns a typed result.

A handler decodes what the wire says (params already typed and scope-checked by
`dispatch.py`), subscribes or unsubscribes its connection, and calls the service that owns
the work (`services.py`: sessions in `authority/sessions.py`, providers in
`providers/service.py`, ...).  Rules, transactions and events live in those services;
nothing here touches the store (`tests/unit/test_layers.py` checks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from backend.authority import loosening
from backend.errors import NotFound
from backend.server import peer
from backend.server.connection import Connection, Reply
from backend.server.fanout import Hub
from backend.server.gate import hello
from backend.server.services import Services
from shared import protocol as p
from shared.config import ConfigView
from shared.methods import METHODS

Handler = Callable[[Connection, Any], Awaitable[Any]]
T = TypeVar("T")


class Methods:
    def __init__(self, services: Services, hub: Hub, epoch: int,
                 request_shutdown: Callable[[], None]) -> None:
        self.svc = services
        self.hub = hub
        self.epoch = epoch
        self.request_shutdown = request_shutdown
        # Each method's handler is the method named like it ("session.events.since":
        # session_events_since), so the table is METHODS itself.
        self.handlers: dict[str, Handler] = {
            name: getattr(self, handler_name(name)) for name in METHODS
        }

    # --- connection ---------------------------------------------------------------

    async def initialize(self, conn: Connection, params: p.InitializeParams) -> p.InitializeResult:
        return hello(conn, params, self.epoch, self.capabilities())

    def capabilities(self) -> p.Capabilities:
        return p.Capabilities(
            methods=sorted(METHODS), events=sorted(p.EVENTS),
            provider=self.svc.providers.summary(), sandbox=self.svc.sandbox.summary(),
            mcp=self.svc.mcp.pool.statuses(tools=False))

    async def shutdown(self, conn: Connection, params: p.NoParams) -> Reply:
        return Reply(p.EmptyResult(), after=self.request_shutdown)

    async def backend_stats(self, conn: Connection, params: p.BackendStatsParams) -> p.BackendStatsResult:
        return self.svc.stats.report(params.recent)

    async def backend_list(self, conn: Connection, params: p.BackendListParams) -> p.BackendListResult:
        return await self.svc.fleet.listing(params.all)

    # --- sessions ---------------------------------------------------------------

    async def session_create(self, conn: Connection, params: p.SessionCreateParams) -> Reply:
        draft = self.svc.sessions.draft(params)
        # Subscribed before the commit, so nothing of the new session is missed.
        self.hub.follow(conn, draft.session_id)
        try:
            session = await self.svc.sessions.create(draft)
        except Exception:
            self.hub.unfollow(conn, draft.session_id)
            raise
        return Reply(p.SessionResult(session=session))

    async def session_list(self, conn: Connection, params: p.SessionListParams) -> p.SessionListResult:
        return await self.svc.sessions.listing(params)

    async def session_get(self, conn: Connection, params: p.SessionIdParams) -> p.SessionResult:
        return p.SessionResult(session=await self.svc.sessions.get(params.session_id))

    async def session_update(self, conn: Connection, params: p.SessionUpdateParams) -> p.SessionResult:
        return p.SessionResult(session=await self.svc.sessions.update(params))

    async def session_delete(self, conn: Connection, params: p.SessionDeleteParams) -> p.DeletedResult:
        await self.svc.sessions.delete(params.session_id, params.force)
        self.hub.drop_session(params.session_id)
        return p.DeletedResult(deleted=True)

    async def session_messages(
        self, conn: Connection, params: p.SessionMessagesParams
    ) -> p.MessagesResult:
        return await self.svc.sessions.messages(params)

    async def session_resume(self, conn: Connection, params: p.SessionSinceParams) -> Reply:
        sid = params.session_id
        self.hub.follow(conn, sid, replay=True)
        result = await self._replaying(conn, sid, self.svc.sessions.resume(sid, params.since_seq))
        return Reply(result, after=lambda: conn.end_replay(sid, result.latest_seq))

    async def session_subscribe(self, conn: Connection, params: p.SessionSinceParams) -> Reply:
        sid = params.session_id
        self.hub.follow(conn, sid, replay=True)
        result = await self._replaying(conn, sid, self.svc.sessions.subscribe(sid, params.since_seq))
        return Reply(result, after=lambda: conn.end_replay(sid, result.latest_seq))

    async def session_unsubscribe(self, conn: Connection, params: p.SessionIdParams) -> p.EmptyResult:
        self.hub.unfollow(conn, params.session_id)
        return p.EmptyResult()

    async def session_events_since(self, conn: Connection, params: p.EventsSinceParams) -> p.EventsResult:
        return await self.svc.sessions.events_since(params)

    async def session_usage(
        self, conn: Connection, params: p.SessionIdParams
    ) -> p.SessionUsageResult:
        return await self.svc.sessions.usage(params.session_id)

    async def session_undo(self, conn: Connection, params: p.SessionUndoParams) -> p.UndoResult:
        return await self.svc.sessions.undo(params)

    async def session_changes(
        self, conn: Connection, params: p.SessionChangesParams
    ) -> p.ChangesResult:
        return await self.svc.sessions.changes(params)

    async def session_compress(
        self, conn: Connection, params: p.SessionCompressParams
    ) -> p.CompressResult:
        return await self.svc.compaction.compress(params)

    # --- input and turns -----------------------------------------------------------

    async def prompt_submit(self, conn: Connection, params: p.PromptSubmitParams) -> p.ReceiptResult:
        newly = not conn.subscribed(params.session_id)
        if newly:
            # Subscribed before the commit, so the submitter sees admission.queued and the turn.
            self.hub.follow(conn, params.session_id)
        try:
            receipt = await self.svc.authority.submit(conn.principal.token_id, params)
        except NotFound:
            if newly:
                self.hub.unfollow(conn, params.session_id)
            raise
        return p.ReceiptResult(receipt=receipt)

    async def attachment_upload(
        self, conn: Connection, params: p.AttachmentUploadParams
    ) -> p.AttachmentUploadResult:
        return await self.svc.attachments.upload(params)

    async def attachment_get(
        self, conn: Connection, params: p.AttachmentGetParams
    ) -> p.AttachmentGetResult:
        return await self.svc.attachments.get(params)

    async def session_regenerate(
        self, conn: Connection, params: p.SessionRegenerateParams
    ) -> p.ReceiptResult:
        newly = not conn.subscribed(params.session_id)
        if newly:  # as prompt.submit: the caller sees its admission and turn
            self.hub.follow(conn, params.session_id)
        try:
            receipt = await self.svc.authority.regenerate(conn.principal.token_id, params)
        except NotFound:
            if newly:
                self.hub.unfollow(conn, params.session_id)
            raise
        return p.ReceiptResult(receipt=receipt)

    async def session_choose(self, conn: Connection, params: p.SessionChooseParams) -> p.ChooseResult:
        return await self.svc.branches.choose(params)

    async def session_fork(self, conn: Connection, params: p.SessionForkParams) -> p.ForkResult:
        ask = self.svc.branches.ask(conn.principal.token_id, params)
        newly = not conn.subscribed(ask.branch_id)
        if newly:  # before the commit, so nothing of the branch is missed
            self.hub.follow(conn, ask.branch_id)
        try:
            return await self.svc.branches.fork(conn.principal.token_id, ask)
        except Exception:
            if newly:
                self.hub.unfollow(conn, ask.branch_id)
            raise

    async def admission_get(self, conn: Connection, params: p.AdmissionIdParams) -> p.ReceiptResult:
        return p.ReceiptResult(receipt=await self.svc.sessions.receipt(params.admission_id))

    async def admission_list(self, conn: Connection, params: p.AdmissionListParams) -> p.ReceiptsResult:
        return p.ReceiptsResult(receipts=await self.svc.sessions.receipts(params))

    async def admission_cancel(self, conn: Connection, params: p.AdmissionIdParams) -> p.ReceiptResult:
        return p.ReceiptResult(receipt=await self.svc.authority.cancel(params.admission_id))

    async def admission_resolve(
        self, conn: Connection, params: p.AdmissionResolveParams
    ) -> p.ReceiptResult:
        return p.ReceiptResult(receipt=await self.svc.authority.resolve(params.admission_id))

    async def turn_interrupt(self, conn: Connection, params: p.SessionIdParams) -> p.InterruptResult:
        return p.InterruptResult(interrupted=await self.svc.sessions.interrupt(params.session_id))

    # --- MCP servers and doors ------------------------------------------------------

    async def mcp_list(self, conn: Connection, params: p.McpListParams) -> p.McpListResult:
        return p.McpListResult(servers=self.svc.mcp.listing(params.name))

    async def mcp_test(self, conn: Connection, params: p.McpTestParams) -> p.McpTestResult:
        return await self.svc.mcp.test(params.name, params.server_config)

    async def door_list(self, conn: Connection, params: p.NoParams) -> p.DoorListResult:
        doors = self.svc.doors
        return p.DoorListResult(doors=await doors.statuses() if doors else [])

    async def door_test(self, conn: Connection, params: p.DoorTestParams) -> p.DoorTestResult:
        return await self.svc.door_service.test(params)

    async def door_set(self, conn: Connection, params: p.DoorSetParams) -> p.DoorSetResult:
        loosened = self.svc.door_service.loosened(params)  # as config.set checks a patch
        if loosened:
            await peer.may_loosen(conn, loosened, self.svc.procs.groups)
        return await self.svc.door_service.set(params)

    # --- approvals ----------------------------------------------------------------

    async def approval_list(self, conn: Connection, params: p.ApprovalListParams) -> p.ApprovalsResult:
        return p.ApprovalsResult(approvals=await self.svc.sessions.pending_approvals(params.session_id))

    async def approval_respond(
        self, conn: Connection, params: p.ApprovalRespondParams
    ) -> p.ApprovalResult:
        return p.ApprovalResult(
            approval=await self.svc.approvals.respond(params.approval_id, params.decision)
        )

    async def clarify_list(self, conn: Connection, params: p.ClarifyListParams) -> p.QuestionsResult:
        return p.QuestionsResult(questions=await self.svc.questions.pending(params.session_id))

    async def clarify_respond(
        self, conn: Connection, params: p.ClarifyRespondParams
    ) -> p.QuestionResult:
        return p.QuestionResult(question=await self.svc.questions.respond(
            params.question_id, params.choice, params.answer))

    async def rules_list(self, conn: Connection, params: p.NoParams) -> p.RulesResult:
        return p.RulesResult(rules=await self.svc.sessions.rules())

    async def rules_delete(self, conn: Connection, params: p.RuleDeleteParams) -> p.EmptyResult:
        await self.svc.sessions.delete_rule(params.rule_id)
        return p.EmptyResult()

    # --- config -----------------------------------------------------------------

    async def config_get(self, conn: Connection, params: p.NoParams) -> ConfigView:
        return self.svc.providers.effective()

    async def config_set(self, conn: Connection, params: p.ConfigSetParams) -> ConfigView:
        loosened = loosening.of_patch(self.svc.config, params.patch)
        if loosened:
            await peer.may_loosen(conn, loosened, self.svc.procs.groups)
        self.svc.config.patch(params.patch)
        self.svc.mcp.pool.sync()  # a server removed, disabled or changed stops now
        if self.svc.doors is not None:
            await self.svc.doors.apply(self.svc.config.config)  # a door changed starts again now
        return self.svc.providers.effective()

    # --- tokens -------------------------------------------------------------------

    async def token_create(
        self, conn: Connection, params: p.TokenCreateParams
    ) -> p.TokenCreateResult:
        return await self.svc.tokens.create(params)

    async def token_revoke(self, conn: Connection, params: p.TokenIdParams) -> Reply:
        await self.svc.tokens.revoke(params.token_id)
        # Open connections of the token close after this response is queued, so a connection
        # revoking its own token still gets the answer.
        return Reply(p.EmptyResult(),
                     after=lambda: self.svc.tokens.changed(params.token_id, None))

    async def token_list(self, conn: Connection, params: p.NoParams) -> p.TokensResult:
        return p.TokensResult(tokens=await self.svc.tokens.listing())

    async def token_update(self, conn: Connection, params: p.TokenUpdateParams) -> Reply:
        info, current = await self.svc.tokens.update(params)
        # Its connections that hold the old scopes close once this response is queued.
        return Reply(p.TokenResult(token=info),
                     after=lambda: self.svc.tokens.changed(params.token_id, current))

    # --- secrets and providers ---------------------------------------------------

    async def secret_set(self, conn: Connection, params: p.SecretSetParams) -> p.SecretSetResult:
        result = await self.svc.secrets.store(params.name, params.value)
        if self.svc.doors is not None:  # a door using the key starts again with it
            await self.svc.doors.apply(self.svc.config.config, secret=params.name)
        return result

    async def provider_test(
        self, conn: Connection, params: p.ProviderTestParams
    ) -> p.ProviderTestResult:
        return await self.svc.providers.test(params)

    async def provider_list(self, conn: Connection, params: p.NoParams) -> p.ProviderListResult:
        return self.svc.providers.listing()

    # --- memory (addition): the agent's notebooks, backend/tools/memory.py -------------

    async def memory_get(self, conn: Connection, params: p.NoParams) -> p.MemoryResult:
        return await self.svc.memory.get()

    async def memory_set(self, conn: Connection, params: p.MemorySetParams) -> p.MemoryResult:
        return await self.svc.memory.set(params.target, params.text)

    # --- the background review (addition): backend/turn/review.py ---------------------------

    async def review_undo(self, conn: Connection, params: p.ReviewUndoParams) -> p.ReviewUndoResult:
        return await self.svc.reviews.undo(params.session_id, params.message_id)

    # --- skills (addition): SKILL.md folders, backend/tools/skills.py --------------------

    async def skill_list(self, conn: Connection, params: p.SkillListParams) -> p.SkillsResult:
        return await self.svc.skills.listing(params.session_id)

    async def skill_get(self, conn: Connection, params: p.SkillParams) -> p.SkillDetail:
        return await self.svc.skills.get(params)

    async def skill_set_enabled(self, conn: Connection, params: p.SkillEnableParams) -> p.SkillDetail:
        return await self.svc.skills.set_enabled(params)

    async def skill_delete(self, conn: Connection, params: p.SkillParams) -> p.SkillsResult:
        return await self.svc.skills.delete(params)

    # --- scheduled prompts --------------------------------------------------------

    async def schedule_create(self, conn: Connection, params: p.ScheduleCreateParams) -> p.ScheduleResult:
        schedule = await self.svc.schedules.create(params, conn.principal.token_id)
        return p.ScheduleResult(schedule=schedule)

    async def schedule_list(self, conn: Connection, params: p.NoParams) -> p.SchedulesResult:
        return p.SchedulesResult(schedules=await self.svc.schedules.listing())

    async def schedule_update(self, conn: Connection, params: p.ScheduleUpdateParams) -> p.ScheduleResult:
        return p.ScheduleResult(schedule=await self.svc.schedules.update(params))

    async def schedule_delete(self, conn: Connection, params: p.ScheduleIdParams) -> p.DeletedResult:
        return p.DeletedResult(deleted=await self.svc.schedules.delete(params.schedule_id))

    # --- helpers ----------------------------------------------------------------

    async def _replaying(self, conn: Connection, sid: str, reading: Awaitable[T]) -> T:
        """A snapshot read for a hand-over; if it fails, the connection stops following."""
        try:
            return await reading
        except Exception:
            conn.end_replay(sid, 0)
            self.hub.unfollow(conn, sid)
            raise


def handler_name(method: str) -> str:
    return method.replace(".", "_")
