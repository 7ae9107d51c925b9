"""Sessions as the methods and the doors see them: create, list and page, read, rename,
delete, snapshot and replay, admissions' receipts, usage, file changes, undo and interrupt.

Each call is one transaction of the store and the rules around it (a session must exist, a
running turn blocks a delete or an undo); the server only decodes params and subscribes the
connection (`server/methods.py`).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend import wire
from backend.authority.queue import SessionAuthority
from backend.authority.takeover import interrupt_anywhere
from backend.errors import InvalidParams, NotFound, SessionBusy
from backend.ids import message_rowid, new_id
from backend.store import (
    admissions,
    approvals,
    branches,
    events,
    leases,
    messages,
    questions,
    sessions,
    usage,
)
from backend.store.checkpoints import paths_of_turn
from backend.store.db import Database, Tx
from backend.store.messages import MessageRecord
from backend.tools import changes as file_changes
from backend.tools.checkpoints import Checkpoints
from shared import protocol as p

REPLAY_CAP = 10_000
RESUME_PAGE = 100
MAX_SEARCH_OFFSET = 1_000_000  # far past any result list a person pages through


@dataclass(frozen=True)
class Draft:
    """A new session's checked values, its id chosen: the caller follows it, then creates it."""
    session_id: str
    cwd: str
    model: str
    title: str


class SessionService:
    def __init__(self, db: Database, authority: SessionAuthority, checkpoints: Checkpoints,
                 default_model: Callable[[], str],
                 choices: Callable[[], list[p.ProviderChoice]] = list) -> None:
        self.db = db
        self.authority = authority
        self.checkpoints = checkpoints
        self.default_model = default_model
        self.choices = choices  # the providers a session may choose (provider.list's)

    # --- one session ------------------------------------------------------------------

    def draft(self, params: p.SessionCreateParams) -> Draft:
        cwd = folder(params.cwd)
        return Draft(new_id("ses"), cwd, params.model or self.default_model(),
                     (params.title or "").strip())

    async def create(self, draft: Draft) -> p.Session:
        """Commits the draft with its `session.created`; a caller that followed
        `draft.session_id` first misses nothing of the new session."""
        session_id, cwd, model, title = draft.session_id, draft.cwd, draft.model, draft.title

        def job(tx: Tx) -> p.Session:
            # Untitled, it is "New session" until its first prompt names it.
            sessions.insert(tx, session_id, title or sessions.UNTITLED, cwd, model, titled=bool(title))
            found = sessions.get(tx, session_id)
            assert found is not None
            session = wire.session(found)
            wire.broadcast(tx, session_id, p.SessionCreated(session=session))
            return session

        return await self.db.write(job)

    async def get(self, session_id: str) -> p.Session:
        session = await self.db.read(lambda tx: sessions.get(tx, session_id))
        if session is None:
            raise NotFound("session", session_id)
        return wire.session(session)

    async def update(self, params: p.SessionUpdateParams) -> p.Session:
        fields: dict[str, Any] = {}
        if params.title is not None:
            if not params.title.strip():
                raise InvalidParams("title", "title is empty")
            fields["title"] = params.title.strip()
            fields["titled"] = True  # a person's title: no prompt renames it
        if params.model is not None:
            fields["model"] = params.model
        if params.provider is not None:
            fields.update(self._provider(params.provider, params.model))

        def job(tx: Tx) -> p.Session:
            if not sessions.exists(tx, params.session_id):
                raise NotFound("session", params.session_id)
            if fields:
                sessions.update(tx, params.session_id, fields)
            found = sessions.get(tx, params.session_id)
            assert found is not None
            session = wire.session(found)
            if fields:
                wire.emit(tx, params.session_id, p.SessionUpdated(session=session))
            return session

        return await self.db.write(job)

    def _provider(self, name: str, model: str | None) -> dict[str, Any]:
        """session.update's `provider` as columns: the name (None for "", the default
        provider) and, unless `model` is given too, that provider's model."""
        choices = self.choices()
        if name == "":
            found = next((c for c in choices if c.default), None)
            return {"provider": None, **({"model": found.model} if found and model is None else {})}
        found = next((c for c in choices if c.name == name), None)
        if found is None:
            names = ", ".join(c.name for c in choices) or "none"
            raise InvalidParams(
                "provider", f"no provider named {name!r} is configured (configured: {names}); "
                "pass one of those (provider.list lists them with their models), \"\" for the "
                "default provider, or add the provider first (Settings, or config.set)")
        return {"provider": name, **({"model": found.model} if model is None else {})}

    async def delete(self, sid: str, force: bool) -> None:
        """Stops the session's drainer and deletes it; the caller forgets its followers."""
        await self.get(sid)
        if self.authority.running(sid) is not None and not force:
            raise SessionBusy("the session is running a turn; interrupt it or pass force:true")
        await self.authority.retire(sid)

        def job(tx: Tx) -> None:
            sessions.delete(tx, sid)
            wire.broadcast(tx, sid, p.SessionDeletedEvent(session_id=sid))

        await self.db.write(job)

    async def undo(self, params: p.SessionUndoParams) -> p.UndoResult:
        sid = params.session_id
        await self.get(sid)
        if self.authority.running(sid) is not None:
            raise SessionBusy("the session is running a turn; wait for it or interrupt it first")
        paths = list(dict.fromkeys(params.paths)) if params.paths is not None else None
        if paths is not None:
            if params.turn_id is None:
                raise InvalidParams("turn_id", "turn_id is required with paths")
            await self._changed_by(sid, params.turn_id, paths)
        turn_id, restored = await self.checkpoints.undo(sid, params.turn_id, paths)
        return p.UndoResult(restored=restored, turn_id=turn_id)

    async def _changed_by(self, sid: str, turn_id: str, paths: list[str]) -> None:
        """Refuses a path the turn did not change: undo puts back only what a turn changed."""
        changed = await self.db.read(lambda tx: paths_of_turn(tx, sid, turn_id))
        for i, path in enumerate(paths):
            if path not in changed:
                raise InvalidParams(f"paths.{i}", f"turn {turn_id} did not change {path}")

    async def changes(self, params: p.SessionChangesParams) -> p.ChangesResult:
        return await file_changes.of_session(self.db, params.session_id, params.limit)

    async def interrupt(self, session_id: str) -> bool:
        await self.get(session_id)
        # Another backend on the same PostgreSQL store may run it: then it is asked.
        return await interrupt_anywhere(self.db, self.authority, session_id)

    async def usage(self, session_id: str) -> p.SessionUsageResult:
        def read(tx: Tx) -> p.SessionUsageResult:
            row = sessions.row(tx, session_id)
            if row is None:
                raise NotFound("session", session_id)
            return p.SessionUsageResult(
                usage=wire.usage(row), rows=[wire.usage_row(r) for r in usage.rows(tx, session_id)])

        return await self.db.read(read)

    # --- listing and paging -----------------------------------------------------------

    async def listing(self, params: p.SessionListParams) -> p.SessionListResult:
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

    async def messages(self, params: p.SessionMessagesParams) -> p.MessagesResult:
        before = _rowid(params.before_id) if params.before_id is not None else None

        def read(tx: Tx) -> p.MessagesResult:
            must_exist(tx, params.session_id)
            page, more = messages.page(tx, params.session_id, before, params.limit)
            return p.MessagesResult(messages=_messages(tx, params.session_id, page), has_more=more)

        return await self.db.read(read)

    # --- snapshots and replay ---------------------------------------------------------

    async def resume(self, sid: str, since: int | None) -> p.ResumeResult:
        def read(tx: Tx) -> p.ResumeResult:
            found = sessions.get(tx, sid)
            if found is None:
                raise NotFound("session", sid)
            session = wire.session(found)
            page, more = messages.page(tx, sid, None, RESUME_PAGE)
            latest = events.latest_seq(tx, sid)
            replay, truncated = _replay(tx, sid, since, latest)
            queue = [wire.receipt(admissions.receipt(tx, r))
                     for r in admissions.list_for(tx, sid, "queued")]
            return p.ResumeResult(
                session=session, status=session.status, messages=_messages(tx, sid, page),
                has_more=more, latest_seq=latest, events=replay, truncated=truncated,
                pending_approvals=[wire.approval(a) for a in approvals.pending(tx, sid)],
                queue=queue, active_turn=self._active_turn(tx, sid),
                pending_questions=[wire.question(q) for q in questions.pending(tx, sid)],
            )

        return await self.db.read(read)

    async def subscribe(self, sid: str, since: int | None) -> p.EventsResult:
        def read(tx: Tx) -> p.EventsResult:
            must_exist(tx, sid)
            latest = events.latest_seq(tx, sid)
            replay, truncated = _replay(tx, sid, since, latest)
            return p.EventsResult(events=replay, latest_seq=latest, truncated=truncated)

        return await self.db.read(read)

    async def events_since(self, params: p.EventsSinceParams) -> p.EventsResult:
        def read(tx: Tx) -> p.EventsResult:
            must_exist(tx, params.session_id)
            latest = events.latest_seq(tx, params.session_id)
            if params.since_seq > latest:
                return p.EventsResult(events=[], latest_seq=latest, truncated=True)
            found = events.since(tx, params.session_id, params.since_seq, params.limit)
            return p.EventsResult(events=wire.events(found), latest_seq=latest, truncated=False)

        return await self.db.read(read)

    def _active_turn(self, tx: Tx, session_id: str) -> p.ActiveTurn | None:
        """The running turn, with the text streamed so far of its current assistant message (read
        in the snapshot's transaction, so it matches `latest_seq`: a window opened mid-stream
        shows it and appends the deltas that follow)."""
        turn = self.authority.running(session_id)
        if turn is not None:
            turn_id = turn.turn_id
        else:  # on a shared store, maybe another backend's: the lease names it
            lease = leases.current(tx, session_id)
            if lease is None or lease.expires_at <= time.time():
                return None
            turn_id = lease.holder.turn_id
        # As this transaction sees it: a turn whose end has just been written is still in the
        # running registry for a moment, and its streamed text would show a second time after
        # the stored answer, with no end event to come and take it away.
        rows = admissions.started_of_turn(tx, session_id, turn_id)
        if not rows:
            return None
        admission_id = rows[0].admission_id
        return p.ActiveTurn(turn_id=turn_id, admission_id=admission_id,
                            text=events.turn_text(tx, session_id, turn_id))

    # --- admissions and approvals, read ---------------------------------------------

    async def receipt(self, admission_id: str) -> p.Receipt:
        def read(tx: Tx) -> p.Receipt:
            row = admissions.by_id(tx, admission_id)
            if row is None:
                raise NotFound("admission", admission_id)
            return wire.receipt(admissions.receipt(tx, row))

        return await self.db.read(read)

    async def receipts(self, params: p.AdmissionListParams) -> list[p.Receipt]:
        def read(tx: Tx) -> list[p.Receipt]:
            must_exist(tx, params.session_id)
            rows = admissions.list_for(tx, params.session_id, params.status)
            return [wire.receipt(admissions.receipt(tx, r)) for r in rows]

        return await self.db.read(read)

    async def pending_approvals(self, session_id: str | None) -> list[p.Approval]:
        def read(tx: Tx) -> list[p.Approval]:
            if session_id is not None:
                must_exist(tx, session_id)
            return [wire.approval(a) for a in approvals.pending(tx, session_id)]

        return await self.db.read(read)

    async def rules(self) -> list[p.Rule]:
        return [wire.rule(r) for r in await self.db.read(approvals.global_rules)]

    async def delete_rule(self, rule_id: str) -> None:
        if not await self.db.write(lambda tx: approvals.delete_rule(tx, rule_id)):
            raise NotFound("rule", rule_id)


def _messages(tx: Tx, session_id: str, page: list[MessageRecord]) -> list[p.Message]:
    """A page of the transcript on the wire, each prompt with the branches forked at it."""
    forks = branches.of_messages(tx, session_id, [m.id for m in page if m.role == "user"])
    return [wire.message(m, forks.get(m.id)) for m in page]


def must_exist(tx: Tx, session_id: str) -> None:
    if not sessions.exists(tx, session_id):
        raise NotFound("session", session_id)


def folder(cwd: str | None) -> str:
    """A new session's folder as a caller gave it: absolute and existing (home if none)."""
    path = Path(cwd).expanduser() if cwd else Path.home()
    if not path.is_absolute():
        raise InvalidParams("cwd", "cwd must be an absolute path")
    if not path.is_dir():
        raise InvalidParams("cwd", f"cwd {str(path)!r} is not an existing folder")
    return str(path.resolve())


def _replay(tx: Tx, sid: str, since: int | None, latest: int) -> tuple[list[p.Event], bool]:
    """Events after `since` for a hand-over; truncated when the client must reload instead."""
    if since is None:
        return [], False
    if since > latest or latest - since > REPLAY_CAP:
        return [], True
    return wire.events(events.since(tx, sid, since, REPLAY_CAP)), False


def _rowid(message_id: str) -> int:
    try:
        return message_rowid(message_id)
    except ValueError:
        raise InvalidParams("before_id", f"{message_id!r} is not a message_id") from None


# Cursors are opaque to clients: base64 of a little JSON, checked as strictly when it comes
# back as any other param, since a client may send anything.

def _cursor(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()


def _decode_cursor(cursor: str | None, key: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode((cursor or "").encode()))[key]
    except (ValueError, KeyError, TypeError):
        raise InvalidParams("cursor", "cursor is not one this backend returned") from None


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
