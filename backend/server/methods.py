"""The JSON-RPC methods: each takes typed params and returns a typed result.

Handlers only translate between the wire and the layers below (authority,
store); durable decisions are made there.  Scope checks and params decoding
happen in `dispatch.py` before a handler runs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from backend import __version__, wire
from backend.authority import loosening, schedule_edits
from backend.authority.queue import SessionAuthority
from backend.authority.schedules import Scheduler
from backend.authority.takeover import interrupt_anywhere
from backend.compress.compressor import Compressor
from backend.config import KEY_STAYS, ConfigFile, api_key, same_destination
from backend.doors.manager import Doors
from backend.errors import (
    EnvironmentFault,
    Forbidden,
    InvalidParams,
    NotFound,
    ProviderError,
    SessionBusy,
)
from backend.ids import message_rowid, new_id
from backend.mcp.connection import Connection as McpConnection
from backend.mcp.pool import McpPool, tool_infos
from backend.providers.base import ToolSpec
from backend.providers.errors import told
from backend.providers.local import LOCAL_DEFAULT, LOCAL_NAME
from backend.providers.probe import PROBE_TIMEOUT_S, probe
from backend.providers.registry import ConfiguredProvider, Providers
from backend.secrets import Secrets
from backend.server import peer
from backend.server.auth import Authenticator
from backend.server.connection import Connection, Reply
from backend.server.fanout import Hub
from backend.server.loopwatch import GcWatch, LoopWatch
from backend.store import admissions, approvals, events, messages, schedules, sessions, usage
from backend.store.db import Database, Tx
from backend.tools import memory, registry
from backend.tools.approvals import Approvals
from backend.tools.checkpoints import Checkpoints
from backend.tools.procs import ProcessTable
from backend.tools.sandbox import Sandbox
from shared import protocol as p
from shared.config import MCP_NAME_PATTERN, ConfigView
from shared.durations import Durations
from shared.methods import METHODS
from shared.zones import local_zone_name

log = logging.getLogger("rpc")

Handler = Callable[[Connection, Any], Awaitable[Any]]
T = TypeVar("T")

REPLAY_CAP = 10_000
MAX_SECRET_BYTES = 8 * 1024
RESUME_PAGE = 100


class Methods:
    def __init__(
        self, db: Database, authority: SessionAuthority, hub: Hub, config: ConfigFile,
        epoch: int, request_shutdown: Callable[[], None], approvals: Approvals,
        checkpoints: Checkpoints, secrets: Secrets, providers: Providers, compressor: Compressor,
        auth: Authenticator, procs: ProcessTable, sandbox: Sandbox, loop_watch: LoopWatch,
        gc_watch: GcWatch, mcp: McpPool, scheduler: Scheduler | None = None,
        doors: Doors | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.doors = doors
        self.mcp = mcp
        self.loop_watch = loop_watch
        self.gc_watch = gc_watch
        self._started = time.monotonic()
        self.auth = auth
        self.procs = procs
        self.sandbox = sandbox
        self.compressor = compressor
        self.secrets = secrets
        self.providers = providers
        self._secrets_lock = asyncio.Lock()  # secrets.json is read, changed and rewritten
        self.approvals = approvals
        self.checkpoints = checkpoints
        self.db = db
        self.authority = authority
        self.hub = hub
        self.config = config
        self.epoch = epoch
        self.request_shutdown = request_shutdown
        # Each method's handler is the method named like it ("session.events.since":
        # session_events_since), so the table is METHODS itself.
        self.handlers: dict[str, Handler] = {
            name: getattr(self, handler_name(name)) for name in METHODS
        }

    # --- connection ---------------------------------------------------------------

    async def initialize(self, conn: Connection, params: p.InitializeParams) -> p.InitializeResult:
        if params.protocol != p.PROTOCOL_VERSION:
            raise InvalidParams(
                "protocol", f"this backend speaks protocol {p.PROTOCOL_VERSION}; upgrade the client"
            )
        conn.initialized = True
        return p.InitializeResult(
            server=p.ServerInfo(name="turnkey-backend", version=__version__),
            protocol=p.PROTOCOL_VERSION,
            epoch=self.epoch,
            principal=p.Principal(
                token_id=conn.principal.token_id,
                scopes=[s for s in p.ALL_SCOPES if s in conn.principal.scopes],
            ),
            capabilities=p.Capabilities(
                methods=sorted(METHODS), events=sorted(p.EVENTS),
                provider=self._provider_summary(), sandbox=self.sandbox.summary(),
                mcp=self.mcp.statuses(tools=False)),
        )

    async def shutdown(self, conn: Connection, params: p.NoParams) -> Reply:
        return Reply(p.EmptyResult(), after=self.request_shutdown)

    async def backend_stats(self, conn: Connection, params: p.BackendStatsParams) -> p.BackendStatsResult:
        lags, holds, pauses = self.loop_watch.lags, self.db.holds, self.gc_watch.pauses
        return p.BackendStatsResult(
            now=time.monotonic(), uptime_s=time.monotonic() - self._started,
            loop=p.LoopStats(
                interval_ms=self.loop_watch.interval_s * 1000, count=lags.count, max_ms=lags.max_ms,
                mean_ms=lags.mean_ms, over=_over(lags), slowest=lags.slowest(),
                recent=lags.recent(params.recent),
            ),
            writer=p.WriterStats(
                count=holds.count, max_ms=holds.max_ms, mean_ms=holds.mean_ms, over=_over(holds),
                slowest=[wire.hold(h) for h in holds.slowest()],
                recent=[wire.hold(h) for h in holds.recent(params.recent)],
            ),
            gc=p.GcStats(
                count=pauses.count, max_ms=pauses.max_ms, mean_ms=pauses.mean_ms, over=_over(pauses),
                slowest=pauses.slowest(), recent=pauses.recent(params.recent),
            ),
        )

    # --- sessions ---------------------------------------------------------------

    async def session_create(self, conn: Connection, params: p.SessionCreateParams) -> Reply:
        cwd = _cwd(params.cwd)
        session_id = new_id("ses")
        chosen = self.providers.default(self.config.config)
        model = params.model or (chosen[1].model if chosen else "")
        title = (params.title or "").strip()

        def job(tx: Tx) -> p.Session:
            # Untitled, it is "New session" until its first prompt names it.
            sessions.insert(tx, session_id, title or sessions.UNTITLED, cwd, model, titled=bool(title))
            found = sessions.get(tx, session_id)
            assert found is not None
            session = wire.session(found)
            events.broadcast(tx, session_id, "session.created", p.SessionEvent(session=session))
            return session

        # Subscribed before the commit, so nothing of the new session is missed.
        self.hub.follow(conn, session_id)
        try:
            session = await self.db.write(job)
        except Exception:
            self.hub.unfollow(conn, session_id)
            raise
        return Reply(p.SessionResult(session=session))

    async def session_list(self, conn: Connection, params: p.SessionListParams) -> p.SessionListResult:
        limit = params.limit
        which = sessions.Which(params.include_delegated, params.delegated_from)

        def read(tx: Tx) -> p.SessionListResult:
            if params.query and params.query.strip():
                offset = _offset_cursor(params.cursor) if params.cursor else 0
                hits = sessions.search(tx, params.query, limit + 1, offset, which)
                nxt = _cursor({"offset": offset + limit}) if len(hits) > limit else None
                hits = hits[:limit]
                return p.SessionListResult(
                    sessions=[wire.session(sessions.summary(tx, h.session)) for h in hits],
                    next_cursor=nxt,
                    matches=[wire.match(m) for m in sessions.matches(tx, params.query, hits)],
                )
            after = _after_cursor(params.cursor) if params.cursor else None
            rows = sessions.page(tx, limit + 1, after, which)
            last = rows[limit - 1] if len(rows) > limit else None
            nxt = _cursor({"after": [last.updated_at, last.session_id]}) if last else None
            return p.SessionListResult(
                sessions=[wire.session(sessions.summary(tx, r)) for r in rows[:limit]],
                next_cursor=nxt,
            )

        return await self.db.read(read)

    async def session_get(self, conn: Connection, params: p.SessionIdParams) -> p.SessionResult:
        return p.SessionResult(session=await self._session(params.session_id))

    async def session_update(self, conn: Connection, params: p.SessionUpdateParams) -> p.SessionResult:
        fields: dict[str, Any] = {}
        if params.title is not None:
            if not params.title.strip():
                raise InvalidParams("title", "title is empty")
            fields["title"] = params.title.strip()
            fields["titled"] = True  # a person's title: no prompt renames it
        if params.model is not None:
            fields["model"] = params.model

        def job(tx: Tx) -> p.Session:
            if not sessions.exists(tx, params.session_id):
                raise NotFound("session", params.session_id)
            if fields:
                sessions.update(tx, params.session_id, fields)
            found = sessions.get(tx, params.session_id)
            assert found is not None
            session = wire.session(found)
            if fields:
                events.append(tx, params.session_id, "session.updated",
                              p.SessionEvent(session=session))
            return session

        return p.SessionResult(session=await self.db.write(job))

    async def session_delete(self, conn: Connection, params: p.SessionDeleteParams) -> p.DeletedResult:
        sid = params.session_id
        await self._session(sid)
        if self.authority.running(sid) is not None and not params.force:
            raise SessionBusy("the session is running a turn; interrupt it or pass force:true")
        await self.authority.retire(sid)

        def job(tx: Tx) -> None:
            sessions.delete(tx, sid)
            events.broadcast(tx, sid, "session.deleted", {"session_id": sid})

        await self.db.write(job)
        self.hub.drop_session(sid)
        return p.DeletedResult(deleted=True)

    async def session_messages(
        self, conn: Connection, params: p.SessionMessagesParams
    ) -> p.MessagesResult:
        before = _rowid(params.before_id) if params.before_id is not None else None

        def read(tx: Tx) -> p.MessagesResult:
            _must_exist(tx, params.session_id)
            page, more = messages.page(tx, params.session_id, before, params.limit)
            return p.MessagesResult(messages=[wire.message(m) for m in page], has_more=more)

        return await self.db.read(read)

    async def session_resume(self, conn: Connection, params: p.SessionSinceParams) -> Reply:
        sid = params.session_id
        self.hub.follow(conn, sid, replay=True)

        def read(tx: Tx) -> p.ResumeResult:
            found = sessions.get(tx, sid)
            if found is None:
                raise NotFound("session", sid)
            session = wire.session(found)
            page, more = messages.page(tx, sid, None, RESUME_PAGE)
            latest = events.latest_seq(tx, sid)
            replay, truncated = _replay(tx, sid, params.since_seq, latest)
            queue = [wire.receipt(admissions.receipt(tx, r))
                     for r in admissions.list_for(tx, sid, "queued")]
            return p.ResumeResult(
                session=session, status=session.status, messages=[wire.message(m) for m in page],
                has_more=more, latest_seq=latest, events=replay, truncated=truncated,
                pending_approvals=[wire.approval(a) for a in approvals.pending(tx, sid)],
                queue=queue, active_turn=self._active_turn(tx, sid),
            )

        result = await self._replaying(conn, sid, read)
        return Reply(result, after=lambda: conn.end_replay(sid, result.latest_seq))

    async def session_subscribe(self, conn: Connection, params: p.SessionSinceParams) -> Reply:
        sid = params.session_id
        self.hub.follow(conn, sid, replay=True)

        def read(tx: Tx) -> p.EventsResult:
            _must_exist(tx, sid)
            latest = events.latest_seq(tx, sid)
            replay, truncated = _replay(tx, sid, params.since_seq, latest)
            return p.EventsResult(events=replay, latest_seq=latest, truncated=truncated)

        result = await self._replaying(conn, sid, read)
        return Reply(result, after=lambda: conn.end_replay(sid, result.latest_seq))

    async def session_unsubscribe(self, conn: Connection, params: p.SessionIdParams) -> p.EmptyResult:
        self.hub.unfollow(conn, params.session_id)
        return p.EmptyResult()

    async def session_events_since(self, conn: Connection, params: p.EventsSinceParams) -> p.EventsResult:
        def read(tx: Tx) -> p.EventsResult:
            _must_exist(tx, params.session_id)
            latest = events.latest_seq(tx, params.session_id)
            if params.since_seq > latest:
                return p.EventsResult(events=[], latest_seq=latest, truncated=True)
            found = events.since(tx, params.session_id, params.since_seq, params.limit)
            return p.EventsResult(events=wire.events(found), latest_seq=latest, truncated=False)

        return await self.db.read(read)

    # --- input and turns -----------------------------------------------------------

    async def prompt_submit(self, conn: Connection, params: p.PromptSubmitParams) -> p.ReceiptResult:
        newly = not conn.subscribed(params.session_id)
        if newly:
            # Subscribed before the commit, so the submitter sees admission.queued and the turn.
            self.hub.follow(conn, params.session_id)
        try:
            receipt = await self.authority.submit(conn.principal.token_id, params)
        except NotFound:
            if newly:
                self.hub.unfollow(conn, params.session_id)
            raise
        return p.ReceiptResult(receipt=receipt)

    async def admission_get(self, conn: Connection, params: p.AdmissionIdParams) -> p.ReceiptResult:
        def read(tx: Tx) -> p.Receipt:
            row = admissions.by_id(tx, params.admission_id)
            if row is None:
                raise NotFound("admission", params.admission_id)
            return wire.receipt(admissions.receipt(tx, row))

        return p.ReceiptResult(receipt=await self.db.read(read))

    async def admission_list(self, conn: Connection, params: p.AdmissionListParams) -> p.ReceiptsResult:
        def read(tx: Tx) -> list[p.Receipt]:
            _must_exist(tx, params.session_id)
            rows = admissions.list_for(tx, params.session_id, params.status)
            return [wire.receipt(admissions.receipt(tx, r)) for r in rows]

        return p.ReceiptsResult(receipts=await self.db.read(read))

    async def admission_cancel(self, conn: Connection, params: p.AdmissionIdParams) -> p.ReceiptResult:
        return p.ReceiptResult(receipt=await self.authority.cancel(params.admission_id))

    async def admission_resolve(
        self, conn: Connection, params: p.AdmissionResolveParams
    ) -> p.ReceiptResult:
        return p.ReceiptResult(receipt=await self.authority.resolve(params.admission_id))

    async def turn_interrupt(self, conn: Connection, params: p.SessionIdParams) -> p.InterruptResult:
        await self._session(params.session_id)
        # Another backend on the same PostgreSQL store may run it: then it is asked.
        interrupted = await interrupt_anywhere(self.db, self.authority, params.session_id)
        return p.InterruptResult(interrupted=interrupted)

    async def session_usage(
        self, conn: Connection, params: p.SessionIdParams
    ) -> p.SessionUsageResult:
        def read(tx: Tx) -> p.SessionUsageResult:
            row = sessions.row(tx, params.session_id)
            if row is None:
                raise NotFound("session", params.session_id)
            return p.SessionUsageResult(
                usage=wire.usage(row), rows=[wire.usage_row(r) for r in usage.rows(tx, params.session_id)])

        return await self.db.read(read)

    async def session_undo(self, conn: Connection, params: p.SessionUndoParams) -> p.UndoResult:
        await self._session(params.session_id)
        if self.authority.running(params.session_id) is not None:
            raise SessionBusy("the session is running a turn; wait for it or interrupt it first")
        turn_id, restored = await self.checkpoints.undo(params.session_id, params.turn_id)
        return p.UndoResult(restored=restored, turn_id=turn_id)

    async def session_compress(
        self, conn: Connection, params: p.SessionCompressParams
    ) -> p.CompressResult:
        """Compaction on request, the same path as the automatic one (same lock and
        summary), whatever the threshold, cooldown or anti-thrash state."""
        sid = params.session_id
        session = await self._session(sid)
        cfg = self.config.config
        if cfg.compression.rotate and self.authority.running(sid) is not None:
            raise SessionBusy("the session is running a turn, and compressing it now would move "
                              "the conversation to a new session under it; wait for the turn to "
                              "end or interrupt it first")
        try:
            link = self.providers.primary(cfg, self.config.path)
        except ProviderError as exc:
            raise InvalidParams("session_id", f"no model to summarize with: {exc.message}") from exc
        tools = self._specs(session.cwd) if link.cfg.tools else ()
        focus = (params.focus or "").strip()[:2000] or None
        out = await self.compressor.compress(sid, link, "requested", tools, focus=focus, manual=True)
        return p.CompressResult(compressed=out.compressed, before_tokens=out.before_tokens,
                                after_tokens=out.after_tokens,
                                session_id=out.child_session_id or sid, reason=out.why_not)

    def _specs(self, cwd: str) -> tuple[ToolSpec, ...]:
        """The tools a request of a session in `cwd` offers, as far as known without starting
        an MCP server: the built-ins and the tools of servers already running for its folder."""
        known = self.mcp.known_tools(Path(cwd))
        return registry.specs() + tuple(ToolSpec(t.name, t.description, t.parameters)
                                        for t in known.values())

    # --- MCP servers ----------------------------------------------------------------

    async def mcp_list(self, conn: Connection, params: p.McpListParams) -> p.McpListResult:
        if params.name is not None:
            if params.name not in self.mcp.servers:
                raise InvalidParams("name", self._no_mcp_server(params.name))
            return p.McpListResult(servers=[self.mcp.status(params.name)])
        return p.McpListResult(servers=self.mcp.statuses())

    async def mcp_test(self, conn: Connection, params: p.McpTestParams) -> p.McpTestResult:
        name = params.name
        saved = self.mcp.servers.get(name)
        if params.server_config is None:
            if saved is None:
                raise InvalidParams("name", self._no_mcp_server(name))
            cfg = saved
        else:
            cfg = self.config.mcp_server_preview(name, params.server_config)
        if not re.fullmatch(MCP_NAME_PATTERN, name):
            raise InvalidParams("name", "a server's name is 1 to 32 letters, digits and '-', "
                                "starting with a letter or digit")
        # A server that acts on a session's folder is tested in the home folder.
        server, seconds = await self.mcp.test(name, cfg, Path.home())
        ok, error = server.ready, server.error
        try:
            status = self.mcp.status(name) if server.cfg is saved else _test_status(server)
        finally:
            if server.cfg is not saved:
                await server.close()
        return p.McpTestResult(ok=ok, server=status, latency_ms=int(seconds * 1000),
                               error=None if ok else (error or "it did not start"))

    async def door_list(self, conn: Connection, params: p.NoParams) -> p.DoorListResult:
        return p.DoorListResult(doors=await self.doors.statuses() if self.doors else [])

    def _no_mcp_server(self, name: str) -> str:
        known = ", ".join(sorted(self.mcp.servers)) or "none"
        return f"no MCP server named {name!r} in config.toml [mcp.servers] (configured: {known})"

    # --- approvals ----------------------------------------------------------------

    async def approval_list(self, conn: Connection, params: p.ApprovalListParams) -> p.ApprovalsResult:
        def read(tx: Tx) -> list[p.Approval]:
            if params.session_id is not None:
                _must_exist(tx, params.session_id)
            return [wire.approval(a) for a in approvals.pending(tx, params.session_id)]

        return p.ApprovalsResult(approvals=await self.db.read(read))

    async def approval_respond(
        self, conn: Connection, params: p.ApprovalRespondParams
    ) -> p.ApprovalResult:
        return p.ApprovalResult(
            approval=await self.approvals.respond(params.approval_id, params.decision)
        )

    async def rules_list(self, conn: Connection, params: p.NoParams) -> p.RulesResult:
        rules = await self.db.read(approvals.global_rules)
        return p.RulesResult(rules=[wire.rule(r) for r in rules])

    async def rules_delete(self, conn: Connection, params: p.RuleDeleteParams) -> p.EmptyResult:
        if not await self.db.write(lambda tx: approvals.delete_rule(tx, params.rule_id)):
            raise NotFound("rule", params.rule_id)
        return p.EmptyResult()

    # --- config -----------------------------------------------------------------

    async def config_get(self, conn: Connection, params: p.NoParams) -> ConfigView:
        return self._effective()

    async def config_set(self, conn: Connection, params: p.ConfigSetParams) -> ConfigView:
        old = msgspec.to_builtins(self.config.config)
        new = msgspec.to_builtins(self.config.preview(params.patch))
        loosened = loosening.loosened(old, new)
        if loosened:
            await self._may_loosen(conn, loosened)
        self.config.patch(params.patch)
        self.mcp.sync()  # a server removed, disabled or changed stops now
        if self.doors is not None:
            await self.doors.apply(self.config.config)  # a door changed starts again now
        return self._effective()

    async def _may_loosen(self, conn: Connection, fields: list[str]) -> None:
        """Loosening approvals or the sandbox takes the owner's token on a connection that no
        tool call's process holds: a command the model ran must not switch off what guards
        the commands it runs next, even with the token it can read from backend.json."""
        names = ", ".join(fields)
        data = {"fields": fields}
        if not conn.principal.owner:
            raise Forbidden(f"forbidden: this change loosens {names}, which only the owner's "
                            f"token may do; change it in the app's Settings", data)
        try:
            client, server = conn.ws.remote_address, conn.ws.local_address
            if not client or not server:
                raise peer.PeerUnknown("the connection has no TCP addresses")
            verdict = await asyncio.to_thread(
                peer.judge, (client[0], client[1]), (server[0], server[1]), os.getpid(),
                self.procs.groups())
        except peer.PeerUnknown as exc:
            raise Forbidden(
                f"forbidden: this change loosens {names}, and the backend could not tell which "
                f"process is on the other end of this connection: {exc}. Change it in the "
                f"app's Settings, or in config.toml while the backend is stopped", data) from None
        if verdict.tool_call is not None:
            log.warning("config.set refused: a tool call's process tried to loosen %s: %s",
                        names, verdict.tool_call)
            raise Forbidden(
                f"forbidden: this change loosens {names}, and it comes from a tool call's "
                f"process: {verdict.tool_call}. Only a person may loosen it, in the app's "
                f"Settings or in config.toml while the backend is stopped", data)
        log.info("config.set loosens %s for the owner (process %s)", names,
                 ",".join(map(str, verdict.pids)))

    # --- tokens -------------------------------------------------------------------

    async def token_create(
        self, conn: Connection, params: p.TokenCreateParams
    ) -> p.TokenCreateResult:
        return await self.auth.create(params)

    async def token_revoke(self, conn: Connection, params: p.TokenIdParams) -> Reply:
        await self.auth.revoke(params.token_id)
        # Open connections of the token close after this response is queued, so a connection
        # revoking its own token still gets the answer.
        return Reply(p.EmptyResult(), after=lambda: self.auth.revoked(params.token_id))

    async def token_list(self, conn: Connection, params: p.NoParams) -> p.TokensResult:
        return p.TokensResult(tokens=await self.auth.listing())

    # --- secrets and providers ---------------------------------------------------

    async def secret_set(self, conn: Connection, params: p.SecretSetParams) -> p.SecretSetResult:
        value = _secret_value(params.value)
        async with self._secrets_lock:
            # A keyring call may block on D-Bus or a keychain prompt: off the event loop.
            stored = await asyncio.to_thread(self.secrets.set, params.name, value)
        # Providers see the new key at their next call: the registry rebuilds a client whose
        # key changed, and Secrets.set replaced the cached value.  A door using it restarts.
        if self.doors is not None:
            await self.doors.apply(self.config.config, secret=params.name)
        warning = None
        if stored == "file":
            warning = (f"no keyring works on this machine, so the key is kept in plain text in "
                       f"{self.secrets.path} (mode 0600: only your user can read it)")
        return p.SecretSetResult(stored=stored, warning=warning)

    async def provider_test(
        self, conn: Connection, params: p.ProviderTestParams
    ) -> p.ProviderTestResult:
        config = self.config.config
        inline = params.provider_config is not None or params.api_key is not None
        if inline and params.provider is None:
            raise InvalidParams("provider", "provider_config and api_key need provider: the name "
                                "of the provider they are for (saved or not)")
        if params.provider is not None and params.provider not in config.providers \
                and params.provider_config is None:
            names = ", ".join(sorted(config.providers)) or "none"
            raise InvalidParams(
                "provider", f"no provider named {params.provider!r} in config (configured: {names})"
            )
        inline_key = _secret_value(params.api_key, "api_key") if params.api_key is not None else None
        name, model = params.provider or "", ""
        trial = None
        try:
            if inline:
                # A settings form's values, not saved: a client of their own, never cached.
                cfg = (self.config.provider_preview(name, params.provider_config)
                       if params.provider_config is not None else config.providers[name])
                model = cfg.model
                key = inline_key or api_key(cfg, self.secrets.get)
                if inline_key is None and key is not None \
                        and not same_destination(config.providers.get(name), cfg):
                    # A stored key goes only where it was saved to go: a form's other URL,
                    # kind or key source (an admin token's, say) gets no stored key.
                    failure = p.ProviderFailure(kind="auth", message=KEY_STAYS, detail=(
                        f"{name}: the form changes where the key is sent (kind, base_url, "
                        "api_key_env or api_key_secret); the saved key was not used"))
                    return p.ProviderTestResult(ok=False, provider=name, model=model,
                                                latency_ms=0, error=failure)
                trial = self.providers.trial(name, cfg, key)
                link = ConfiguredProvider(name, cfg, trial)
            elif params.provider is None:
                link = self.providers.primary(config, self.config.path)
                key = api_key(link.cfg, self.secrets.get)
            else:
                cfg = config.providers[params.provider]
                model = cfg.model
                link = ConfiguredProvider(name, cfg, self.providers.get(name, cfg))
                key = api_key(cfg, self.secrets.get)
        except ProviderError as exc:  # none configured, or a kind this backend cannot call
            failure = p.ProviderFailure(kind=exc.kind, message=told(exc), detail=exc.message)
            return p.ProviderTestResult(ok=False, provider=name, model=model, latency_ms=0,
                                        error=failure)
        try:
            result = await probe(link.provider, min(PROBE_TIMEOUT_S, link.cfg.request_timeout_s),
                                 key)
        finally:
            if trial is not None:
                await trial.aclose()
        error = None
        if result.error_kind is not None:
            error = p.ProviderFailure(kind=result.error_kind, message=result.error_message or "",
                                      detail=result.error_detail)
        return p.ProviderTestResult(ok=result.ok, provider=link.name, model=link.provider.model,
                                    latency_ms=result.latency_ms, error=error)

    # --- memory (addition): the agent's notebooks, backend/tools/memory.py -------------

    async def memory_get(self, conn: Connection, params: p.NoParams) -> p.MemoryResult:
        files = await asyncio.to_thread(self._memory_read)
        return p.MemoryResult(user=_memory_file(files["user"]),
                              environment=_memory_file(files["environment"]))

    async def memory_set(self, conn: Connection, params: p.MemorySetParams) -> p.MemoryResult:
        """The same checks as the tool's writes; the event tells open editors."""
        text = params.text

        def write() -> memory.Usage:
            try:
                return memory.update(self._memory_dir, params.target, lambda current: text)
            except memory.MemoryUnsafe as exc:
                raise EnvironmentFault(str(exc)) from None
            except memory.MemoryRefused as exc:
                raise InvalidParams("text", str(exc)) from None

        usage = await asyncio.to_thread(write)
        registry.MEMORY.changed(params.target, usage)
        return await self.memory_get(conn, p.NoParams())

    @property
    def _memory_dir(self) -> Path:
        return self.config.path.parent  # the data folder (config.toml lives at its top)

    def _memory_read(self) -> dict[memory.Target, memory.Usage]:
        try:
            return memory.read_all(self._memory_dir)
        except memory.MemoryRefused as exc:
            raise EnvironmentFault(str(exc)) from None

    # --- helpers ----------------------------------------------------------------

    # --- scheduled prompts --------------------------------------------------------

    async def schedule_create(self, conn: Connection, params: p.ScheduleCreateParams) -> p.ScheduleResult:
        cwd = _cwd(params.new_session.cwd) if params.new_session is not None else None
        values = schedule_edits.create_values(
            params, conn.principal.token_id, local_zone_name(), datetime.now(UTC), cwd)

        def job(tx: Tx) -> p.Schedule:
            if params.session_id is not None:
                _must_exist(tx, params.session_id)
            row = schedules.insert(tx, values)
            schedules.changed(tx, row)
            return wire.schedule(row)

        return p.ScheduleResult(schedule=await self._scheduled(job))

    async def schedule_list(self, conn: Connection, params: p.NoParams) -> p.SchedulesResult:
        rows = await self.db.read(schedules.all_)
        return p.SchedulesResult(schedules=[wire.schedule(r) for r in rows])

    async def schedule_update(self, conn: Connection, params: p.ScheduleUpdateParams) -> p.ScheduleResult:
        now = datetime.now(UTC)

        def job(tx: Tx) -> p.Schedule:
            row = schedules.get(tx, params.schedule_id)
            if row is None:
                raise NotFound("schedule", params.schedule_id)
            fields = schedule_edits.update_fields(row, params, now)
            return wire.schedule(schedules.update(tx, row.schedule_id, fields) if fields else row)

        return p.ScheduleResult(schedule=await self._scheduled(job))

    async def schedule_delete(self, conn: Connection, params: p.ScheduleIdParams) -> p.DeletedResult:
        def job(tx: Tx) -> bool:
            if not schedules.delete(tx, params.schedule_id):
                raise NotFound("schedule", params.schedule_id)
            return True

        return p.DeletedResult(deleted=await self._scheduled(job))

    async def _scheduled(self, job: Callable[[Tx], T]) -> T:
        """Runs a schedule's change, then wakes the scheduler: its next firing may be sooner."""
        result = await self.db.write(job)
        if self.scheduler is not None:
            self.scheduler.wake()
        return result

    def _effective(self) -> ConfigView:
        """The effective config, with what turns use now (the offline model, perhaps)."""
        view = self.config.effective(self.secrets.get)
        return msgspec.structs.replace(view, active_provider=self._provider_summary())

    def _provider_summary(self) -> p.ProviderSummary:
        """What turns will use, so a front-end can say so (and warn about the tiny model)."""
        chosen = self.providers.default(self.config.config)
        if chosen is None:
            return p.ProviderSummary(configured=False)
        name, cfg = chosen
        offline = name == LOCAL_NAME and cfg is LOCAL_DEFAULT
        return p.ProviderSummary(configured=not offline, name=name, model=cfg.model, kind=cfg.kind,
                                 offline_default=offline)

    async def _session(self, session_id: str) -> p.Session:
        session = await self.db.read(lambda tx: sessions.get(tx, session_id))
        if session is None:
            raise NotFound("session", session_id)
        return wire.session(session)

    async def _replaying(self, conn: Connection, sid: str, read: Callable[[Tx], Any]) -> Any:
        try:
            return await self.db.read(read)
        except Exception:
            conn.end_replay(sid, 0)
            self.hub.unfollow(conn, sid)
            raise

    def _active_turn(self, tx: Tx, session_id: str) -> p.ActiveTurn | None:
        """The running turn, with the text streamed so far of its current assistant message (read
        in the snapshot's transaction, so it matches `latest_seq`: a window opened mid-stream
        shows it and appends the deltas that follow)."""
        turn = self.authority.running(session_id)
        if turn is None:
            return None
        return p.ActiveTurn(turn_id=turn.turn_id, admission_id=turn.admission_id,
                            text=events.turn_text(tx, session_id, turn.turn_id))


def _over(durations: Durations[Any]) -> list[p.Threshold]:
    return [p.Threshold(ms=ms, count=n) for ms, n in durations.over_thresholds()]


def handler_name(method: str) -> str:
    return method.replace(".", "_")


def _replay(tx: Tx, sid: str, since: int | None, latest: int) -> tuple[list[p.Event], bool]:
    """Events after `since` for a hand-over; truncated when the client must reload instead."""
    if since is None:
        return [], False
    if since > latest or latest - since > REPLAY_CAP:
        return [], True
    return wire.events(events.since(tx, sid, since, REPLAY_CAP)), False


def _must_exist(tx: Tx, session_id: str) -> None:
    if not sessions.exists(tx, session_id):
        raise NotFound("session", session_id)


def _cwd(cwd: str | None) -> str:
    path = Path(cwd).expanduser() if cwd else Path.home()
    if not path.is_absolute():
        raise InvalidParams("cwd", "cwd must be an absolute path")
    if not path.is_dir():
        raise InvalidParams("cwd", f"cwd {str(path)!r} is not an existing folder")
    return str(path.resolve())


def _secret_value(raw: str, field: str = "value") -> str:
    """A key as sent: trimmed (pasted keys end in a newline), 1 byte to 8 KiB.  Errors
    describe the value, never quote it (dispatch already refused lone surrogates)."""
    value = raw.strip()
    if not value:
        raise InvalidParams(field, f"{field} is empty (surrounding whitespace is trimmed)")
    if len(value.encode()) > MAX_SECRET_BYTES:
        raise InvalidParams(field, f"{field} is longer than {MAX_SECRET_BYTES // 1024} KiB")
    if not (value.isascii() and value.isprintable()):
        # Keys and tokens travel in HTTP headers, which carry printable ASCII only: such a
        # value could never be sent, so every request with it would fail.
        raise InvalidParams(field, f"{field} has a character that is not printable ASCII; keys "
                            "and tokens are letters, digits and punctuation (was the wrong "
                            "text pasted?)")
    return value


def _rowid(message_id: str) -> int:
    try:
        return message_rowid(message_id)
    except ValueError:
        raise InvalidParams("before_id", f"{message_id!r} is not a message_id") from None


def _cursor(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()


def _decode_cursor(cursor: str | None, key: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode((cursor or "").encode()))[key]
    except (ValueError, KeyError, TypeError):
        raise InvalidParams("cursor", "cursor is not one this backend returned") from None


MAX_SEARCH_OFFSET = 1_000_000  # far past any result list a person pages through


def _offset_cursor(cursor: str) -> int:
    offset = _decode_cursor(cursor, "offset")
    if not isinstance(offset, int) or isinstance(offset, bool) \
            or not 0 <= offset <= MAX_SEARCH_OFFSET:
        raise InvalidParams("cursor", "cursor is not one this backend returned")
    return offset


def _after_cursor(cursor: str) -> tuple[str, str]:
    after = _decode_cursor(cursor, "after")
    if not (isinstance(after, list) and len(after) == 2
            and all(isinstance(v, str | int) and not isinstance(v, bool) for v in after)):
        raise InvalidParams("cursor", "cursor is not one this backend returned")
    return str(after[0]), str(after[1])


def _memory_file(usage: memory.Usage) -> p.MemoryFile:
    return p.MemoryFile(text=usage.text, used=usage.used, limit=usage.limit)


def _test_status(server: McpConnection) -> p.McpServerStatus:
    """A throwaway test connection's status (a form not saved yet)."""
    tools = None
    if server.ready and server.tools is not None:
        tools = tool_infos(server.name, server.cfg, server.tools)
    return p.McpServerStatus(name=server.name, transport=server.cfg.transport, state=server.state,
                             error=server.error, tools=tools, sandboxed=server.sandboxed)
