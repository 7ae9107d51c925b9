"""The store's records as the wire's structs: the one place the backend converts them, and
where the store's reports of what changed become the broadcasts every reader hears, and
where every event is emitted: `emit` (stored in the session's log) and `broadcast` (to every
reader, not stored) take the event's struct, and its name comes from the events table
(shared/protocol/events.py), never from a string at the call site.

The store (backend/store/) never imports `shared.protocol`: it returns its records and
reports changes (`events.Report`); everything above it that answers a client, emits an
event or publishes converts here.  This module sits in its own layer just above the store
(docs/ARCHITECTURE.md, "Module map and the import rule"), because callers as low as the
tools (approvals) and compression need wire structs.  Each function builds the struct the
store built before it moved here, field for field, so the bytes on the wire are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from backend.ids import message_id, now, stamp
from backend.store import admissions
from backend.store import events as log
from backend.store.admissions import ReceiptRecord
from backend.store.approvals import ApprovalRecord, RuleRecord
from backend.store.db import Hold, Tx
from backend.store.events import EventRecord, Report, StoredEvent, as_data
from backend.store.messages import MessageRecord
from backend.store.peers import PeerRecord
from backend.store.questions import QuestionRecord
from backend.store.schedules import ScheduleChange, ScheduleRecord
from backend.store.sessions import Match, SessionChanged, SessionRecord, SessionSummary
from backend.store.tokens import TokenRecord
from backend.store.usage import UsageRecord
from shared import protocol as p


def event(r: EventRecord) -> p.Event:
    return p.Event(session_id=r.session_id, type=r.type, ts=r.ts, data=r.data, seq=r.seq,
                   turn_id=r.turn_id, admission_id=r.admission_id)


def events(rs: list[EventRecord]) -> list[p.Event]:
    return [event(r) for r in rs]


# --- emitting events -------------------------------------------------------------------------


def emit(
    tx: Tx, session_id: str, data: p.EventData, *,
    turn_id: str | None = None, admission_id: str | None = None,
) -> EventRecord:
    """Stores `data` as the session's next event (named by its struct's row in the events
    table) and queues it for publishing on commit."""
    return log.append(tx, session_id, p.event_name(data), data, turn_id=turn_id,
                      admission_id=admission_id)


def broadcast(
    tx: Tx, session_id: str, data: p.EventData, *,
    turn_id: str | None = None, admission_id: str | None = None,
) -> None:
    """Queues `data` as an event for every reader on commit, without a seq (not stored)."""
    log.broadcast(tx, session_id, p.event_name(data), data, turn_id=turn_id,
                  admission_id=admission_id)


def emit_to_all(tx: Tx, session_id: str, data: p.EventData, turn_id: str) -> None:
    """What waits on the person (an approval, a question), asked or closed: `data` stored in
    the session's log for its subscribers and broadcast without a seq to every reader (the tray
    and a door show it for sessions no window has open); both carry the turn's turn_id and
    admission_id, as every event of a turn does."""
    admission_id = admissions.of_turn(tx, session_id, turn_id)
    emit(tx, session_id, data, turn_id=turn_id, admission_id=admission_id)
    broadcast(tx, session_id, data, turn_id=turn_id, admission_id=admission_id)


def announcement(data: p.EventData, session_id: str = "") -> StoredEvent:
    """`data` as an event to publish now, outside any transaction (the hub's `publish`):
    session-less by default, no seq, not stored (an MCP server's, a door's, a notebook's)."""
    record = EventRecord(session_id=session_id, type=p.event_name(data), ts=now(),
                         data=as_data(data))
    return StoredEvent(record, False)


# --- sessions ----------------------------------------------------------------------------


def usage(r: SessionRecord | SessionSummary) -> p.Usage:
    """A session's usage totals."""
    return p.Usage(
        input_tokens=r.input_tokens, output_tokens=r.output_tokens,
        cached_tokens=r.cached_tokens, cost_usd=round(r.cost_usd, 8),
        estimated=r.usage_estimated,
    )


def session(s: SessionSummary) -> p.Session:
    return p.Session(
        session_id=s.session_id, title=s.title, cwd=s.cwd, model=s.model,
        created_at=s.created_at, updated_at=s.updated_at, status=s.status,
        message_count=s.message_count, usage=usage(s),
        parent_session_id=s.parent_session_id, child_session_id=s.child_session_id,
        latest_seq=s.latest_seq, delegated_from=s.delegated_from,
        delegated_call_id=s.delegated_call, folder_warning=s.folder_warning,
        provider=s.provider,
        forked_from=s.forked_from, forked_at=s.forked_at,
    )


def match(m: Match) -> p.SearchMatch:
    return p.SearchMatch(
        session_id=m.session_id,
        message_id=message_id(m.message_rowid) if m.message_rowid is not None else None,
        snippet=m.snippet, highlights=m.highlights,
    )


def usage_row(r: UsageRecord) -> p.UsageRow:
    return p.UsageRow(
        provider=r.provider, model=r.model, task=r.task, calls=r.calls,
        input_tokens=r.input_tokens, output_tokens=r.output_tokens,
        cached_tokens=r.cached_tokens, cost_usd=round(r.cost_usd, 8), estimated=r.estimated,
    )


# --- transcripts and the queue --------------------------------------------------------------


def message(r: MessageRecord, branches: list[str] | None = None) -> p.Message:
    """A transcript message; `compacted` as the record holds it (`messages.page` works it
    out: the row's flag, or a compression's range); `branches`, the sessions forked at it."""
    meta = json.loads(r.meta) if r.meta else None
    return p.Message(
        message_id=message_id(r.id), session_id=r.session_id, role=r.role,
        content=r.content, compacted=r.compacted, created_at=r.created_at,
        turn_id=r.turn_id, tool_calls=json.loads(r.tool_calls) if r.tool_calls else None,
        call_id=r.call_id, tool_name=r.tool_name, status=r.status,
        note_kind=r.note_kind, meta=meta, active=r.active, branches=branches or None,
        attachments=_attachments(meta.get("attachments")) if meta and r.role == "user" else None,
    )


def _attachments(items: Any) -> list[p.MessageAttachment] | None:
    """A prompt's files from its row's meta (a tool row's older `attachments`, MCP images
    by path, are not these: they have no sha256)."""
    if not isinstance(items, list):
        return None
    out = [msgspec.convert(i, p.MessageAttachment) for i in items
           if isinstance(i, dict) and "sha256" in i]
    return out or None


def receipt(rr: ReceiptRecord) -> p.Receipt:
    r = rr.row
    return p.Receipt(
        admission_id=r.admission_id, session_id=r.session_id, request_id=r.request_id,
        status=r.status, duplicate=rr.duplicate, created_at=r.created_at,
        outcome=r.outcome, position=rr.position, started_at=r.started_at,
        settled_at=r.settled_at, final_text=r.final_text,
        failure_reason=r.failure_reason, turn_id=r.turn_id,
        text=rr.text, steer=rr.steer, origin=rr.origin, regenerates=rr.regenerates,
        attachments=[msgspec.convert(a, p.MessageAttachment) for a in rr.attachments]
        if rr.attachments else None,
    )


# --- approvals, tokens, schedules ------------------------------------------------------------


def approval(r: ApprovalRecord) -> p.Approval:
    return p.Approval(
        approval_id=r.approval_id, session_id=r.session_id, turn_id=r.turn_id,
        call_id=r.call_id, tool=r.tool, summary=r.summary, reason=r.reason, status=r.status,
        created_at=r.created_at, expires_at=r.expires_at, decision=r.decision,
        decided_at=r.decided_at, decided_by=r.decided_by,
    )


def question(r: QuestionRecord) -> p.Question:
    return p.Question(
        question_id=r.question_id, session_id=r.session_id, turn_id=r.turn_id,
        call_id=r.call_id, question=r.question, choices=list(r.choices),
        allow_other=r.allow_other, status=r.status, created_at=r.created_at,
        expires_at=r.expires_at, answer=r.answer, choice=r.choice, answered_at=r.answered_at,
        answered_by=r.answered_by, followup_admission_id=r.followup_admission_id,
    )


def rule(r: RuleRecord) -> p.Rule:
    return p.Rule(rule_id=r.rule_id, tool=r.tool, pattern=r.pattern, created_at=r.created_at)


def token(r: TokenRecord) -> p.TokenInfo:
    return p.TokenInfo(token_id=r.token_id, label=r.label, scopes=list(r.scopes),
                       created_at=r.created_at, revoked=r.revoked, revoked_at=r.revoked_at,
                       expires_at=r.expires_at)


def schedule(r: ScheduleRecord) -> p.Schedule:
    spec = None
    if r.new_session is not None:
        spec = p.NewSessionSpecWire(**json.loads(r.new_session))
    return p.Schedule(
        schedule_id=r.schedule_id, session_id=r.session_id, new_session=spec,
        text=r.text, cron=r.cron, at=r.at, timezone=r.timezone,
        missed=r.missed, enabled=r.enabled, next_fire_at=r.next_fire_at,
        last_fired_at=r.last_fired_at, last_admission_id=r.last_admission_id,
        last_session_id=r.last_session_id, created_at=r.created_at,
        updated_at=r.updated_at, disabled_reason=r.disabled_reason,
    )


def peer(r: PeerRecord, now: float, dead_after_s: float, sessions_held: int,
         this: bool) -> p.BackendSummary:
    """A backends row as backend.list shows it at `now` (the answering backend's clock)."""
    return p.BackendSummary(
        epoch=r.epoch, host=r.host, pid=r.pid, started_at=stamp(r.started_at),
        heartbeat_at=stamp(r.heartbeat_at), heartbeat_age_s=max(0.0, now - r.heartbeat_at),
        state=r.state(now, dead_after_s),
        dead_at=stamp(r.dead_at) if r.dead_at is not None else None,
        sessions_held=sessions_held, this=this,
    )


def hold(h: Hold) -> p.HoldSample:
    return p.HoldSample(at=h.at, ms=h.ms, jobs=h.jobs, slowest=h.slowest,
                        slowest_ms=h.slowest_ms, commit_ms=h.commit_ms, cpu_ms=h.cpu_ms)


# --- what changed, announced ----------------------------------------------------------------


def announced(report: Report) -> StoredEvent:
    """The broadcast (no seq, to every reader) that a store report becomes, with the time
    the store reported it: `session.updated` with the session's summary as the committing
    job left it; `schedule.changed`."""
    if isinstance(report, SessionChanged):
        s = report.summary
        updated = p.SessionUpdated(session=session(s))
        return StoredEvent(EventRecord(session_id=s.session_id, type=p.event_name(updated),
                                       ts=report.ts, data=as_data(updated)), False)
    if isinstance(report, ScheduleChange):
        row = report.row
        changed = p.ScheduleChanged(schedule_id=report.schedule_id, deleted=row is None,
                                    schedule=schedule(row) if row is not None else None,
                                    fired=report.fired)
        return StoredEvent(EventRecord(session_id="", type=p.event_name(changed), ts=report.ts,
                                       data=as_data(changed)), False)
    raise TypeError(f"no broadcast for {type(report).__name__}")


def announcing(publisher: Callable[[Any], None]) -> Callable[[Any], None]:
    """The store's publisher that hands `publisher` each committed item, a report as the
    broadcast it stands for (`announced`), in commit order."""

    def publish(item: Any) -> None:
        publisher(announced(item) if isinstance(item, Report) else item)

    return publish
