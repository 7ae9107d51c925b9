"""The messages table: the transcript people read, with the wire sidecar the model replays."""

from __future__ import annotations

import json
from typing import Any

from backend.ids import message_id, now
from backend.store import sessions
from backend.store.db import Tx
from backend.store.records import Record
from shared.protocol import Message, Role


class MessageRecord(Record, frozen=True):
    """A messages row.  `tool_calls`, `api_tool_calls` and `meta` are the stored JSON text;
    `api_content` and `api_tool_calls` are the wire sidecar (None: as people see it)."""

    id: int
    session_id: str
    turn_id: str | None
    role: Role
    content: str
    api_content: str | None
    tool_calls: str | None
    api_tool_calls: str | None
    call_id: str | None
    tool_name: str | None
    status: str | None
    note_kind: str | None
    meta: str | None
    active: bool
    compacted: bool
    created_at: str


class ModelRow(Record, frozen=True):
    """The columns of a row that a model request (and a compression of it) is built from:
    every request reads the whole active transcript, so it reads no more than these."""

    id: int
    role: Role
    content: str
    api_content: str | None
    note_kind: str | None
    tool_calls: str | None
    api_tool_calls: str | None
    call_id: str | None
    tool_name: str | None
    status: str | None
    meta: str | None


def insert(
    tx: Tx,
    session_id: str,
    role: Role,
    content: str,
    *,
    turn_id: str | None = None,
    api_content: str | None = None,
    status: str | None = None,
    note_kind: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    call_id: str | None = None,
    tool_name: str | None = None,
    meta: dict[str, Any] | None = None,
) -> str:
    """Appends a row; returns its message_id."""
    cur = tx.execute(
        "INSERT INTO messages (session_id, turn_id, role, content, api_content, status, "
        "note_kind, tool_calls, call_id, tool_name, meta, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, turn_id, role, content, api_content, status, note_kind,
         json.dumps(tool_calls) if tool_calls else None, call_id, tool_name,
         json.dumps(meta) if meta else None, now()),
    )
    assert cur.lastrowid is not None
    sessions.changed(tx, session_id)  # its message_count
    return message_id(cur.lastrowid)


def page(tx: Tx, session_id: str, before_rowid: int | None, limit: int) -> tuple[list[Message], bool]:
    """Up to `limit` messages just before `before_rowid` (default: the end), in order."""
    bound = before_rowid if before_rowid is not None else 2**62
    rows = tx.all(
        "SELECT * FROM messages WHERE session_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
        (session_id, bound, limit + 1),
    )
    has_more = len(rows) > limit
    return [to_message(MessageRecord.from_row(r)) for r in reversed(rows[:limit])], has_more


def for_model(tx: Tx, session_id: str) -> list[ModelRow]:
    """Active, uncompacted rows the model may see, in transcript order."""
    return [ModelRow.from_row(r) for r in tx.all(
        "SELECT id, role, content, api_content, note_kind, tool_calls, api_tool_calls, call_id, "
        "tool_name, status, meta FROM messages "
        "WHERE session_id = ? AND active = 1 AND compacted = 0 ORDER BY id",
        (session_id,),
    )]


def to_message(r: MessageRecord) -> Message:
    return Message(
        message_id=message_id(r.id), session_id=r.session_id, role=r.role,
        content=r.content, compacted=r.compacted, created_at=r.created_at,
        turn_id=r.turn_id, tool_calls=json.loads(r.tool_calls) if r.tool_calls else None,
        call_id=r.call_id, tool_name=r.tool_name, status=r.status,
        note_kind=r.note_kind, meta=json.loads(r.meta) if r.meta else None,
    )


def open_calls(tx: Tx, session_id: str, turn_id: str) -> list[dict[str, Any]]:
    """The turn's tool calls that have no stored result yet, in call order."""
    answered = {
        r["call_id"] for r in tx.all(
            "SELECT call_id FROM messages WHERE session_id = ? AND turn_id = ? AND role = 'tool'",
            (session_id, turn_id),
        )
    }
    out: list[dict[str, Any]] = []
    for r in tx.all(
        "SELECT tool_calls FROM messages WHERE session_id = ? AND turn_id = ? AND role = 'assistant' "
        "AND tool_calls IS NOT NULL ORDER BY id",
        (session_id, turn_id),
    ):
        out.extend(c for c in json.loads(r["tool_calls"]) if c["call_id"] not in answered)
    return out
