"""The messages table: the transcript people read, with the wire sidecar the model replays."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from backend.ids import message_id, now
from backend.store import sessions
from backend.store.db import Tx
from backend.store.records import Record
from shared.literals import Role


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
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (session_id, turn_id, role, content, api_content, status, note_kind,
         json.dumps(tool_calls) if tool_calls else None, call_id, tool_name,
         json.dumps(meta) if meta else None, now()),
    )
    rowid = int(cur.fetchone()[0])
    sessions.changed(tx, session_id)  # its message_count
    return message_id(rowid)


def mark_undone(tx: Tx, session_id: str, call_ids: list[str]) -> None:
    """Adds `undone: true` to the meta of the calls' tool rows: `session.undo` put back what
    they changed, and a window that opens the session later reads it there."""
    for call_id in call_ids:
        r = tx.one("SELECT id, meta FROM messages WHERE session_id = ? AND role = 'tool' "
                   "AND call_id = ?", (session_id, call_id))
        if r is None:
            continue
        meta = {**(json.loads(r["meta"]) if r["meta"] else {}), "undone": True}
        tx.execute("UPDATE messages SET meta = ? WHERE id = ?", (json.dumps(meta), r["id"]))


def of_turn(tx: Tx, session_id: str, turn_id: str) -> list[MessageRecord]:
    """A turn's rows in order (the background review reads the turn it reviews)."""
    return [MessageRecord.from_row(r) for r in tx.all(
        "SELECT * FROM messages WHERE session_id = ? AND turn_id = ? ORDER BY id",
        (session_id, turn_id))]


def by_rowid(tx: Tx, session_id: str, rowid: int) -> MessageRecord | None:
    r = tx.one("SELECT * FROM messages WHERE session_id = ? AND id = ?", (session_id, rowid))
    return MessageRecord.from_row(r) if r is not None else None


def set_meta(tx: Tx, rowid: int, meta: dict[str, Any]) -> None:
    tx.execute("UPDATE messages SET meta = ? WHERE id = ?", (json.dumps(meta), rowid))


def add_to_prompt(tx: Tx, session_id: str, turn_id: str, api_content: str,
                  meta: dict[str, Any]) -> bool:
    """Gives the turn's prompt row (its first user row) what the model reads instead of its
    text, and adds `meta` to its meta; False when the turn has no prompt row."""
    r = tx.one("SELECT id, meta FROM messages WHERE session_id = ? AND turn_id = ? "
               "AND role = 'user' ORDER BY id LIMIT 1", (session_id, turn_id))
    if r is None:
        return False
    merged = {**(json.loads(r["meta"]) if r["meta"] else {}), **meta}
    tx.execute("UPDATE messages SET api_content = ?, meta = ? WHERE id = ?",
               (api_content, json.dumps(merged), r["id"]))
    return True


def prompts_of_turns(tx: Tx, session_id: str, turn_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Each turn's first user row (its prompt): turn_id -> (content, created_at)."""
    if not turn_ids:
        return {}
    marks = ", ".join("?" for _ in turn_ids)
    found: dict[str, tuple[str, str]] = {}
    for r in tx.all(f"SELECT turn_id, content, created_at FROM messages WHERE session_id = ? "
                    f"AND turn_id IN ({marks}) AND role = 'user' ORDER BY id", (session_id, *turn_ids)):
        found.setdefault(str(r["turn_id"]), (str(r["content"]), str(r["created_at"])))
    return found


def tool_metas(tx: Tx, session_id: str, turn_id: str) -> dict[str, dict[str, Any]]:
    """The meta of the turn's tool rows, by call_id."""
    return {str(r["call_id"]): json.loads(r["meta"]) if r["meta"] else {} for r in tx.all(
        "SELECT call_id, meta FROM messages WHERE session_id = ? AND turn_id = ? AND role = 'tool'",
        (session_id, turn_id))}


def turns_from(tx: Tx, session_id: str, rowid: int) -> list[str]:
    """The turns with a row at or after `rowid`, in order of their first such row."""
    return [str(r[0]) for r in tx.all(
        "SELECT turn_id, min(id) AS first FROM messages WHERE session_id = ? AND id >= ? "
        "AND turn_id IS NOT NULL GROUP BY turn_id ORDER BY first", (session_id, rowid))]


def page(tx: Tx, session_id: str, before_rowid: int | None,
         limit: int) -> tuple[list[MessageRecord], bool]:
    """Up to `limit` messages just before `before_rowid` (default: the end), in order, and
    whether there are more.  Each record's `compacted` is as people see it: the row's flag,
    or a compression's range that took the row out of the model's view."""
    bound = before_rowid if before_rowid is not None else 2**62
    rows = tx.all(
        "SELECT * FROM messages WHERE session_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
        (session_id, bound, limit + 1),
    )
    has_more = len(rows) > limit
    ranges = hidden_ranges(tx, session_id)
    return [msgspec.structs.replace(m, compacted=True) if not m.compacted and _hidden(ranges, m)
            else m for m in MessageRecord.from_rows(rows[:limit][::-1])], has_more


_MODEL_VIEW = "session_id = ? AND active = 1 AND compacted = 0"
_COLUMNS = ("SELECT id, role, content, api_content, note_kind, tool_calls, api_tool_calls, "
            "call_id, tool_name, status, meta FROM messages WHERE ")


def for_model(tx: Tx, session_id: str) -> list[ModelRow]:
    """Active, uncompacted rows the model may see, in transcript order: the partial index's
    ranges between what compressions took out (`hidden_ranges`)."""
    out: list[ModelRow] = []
    for where, params in _visible(tx, session_id):  # (a cursor: rows become records as read)
        out += ModelRow.from_rows(tx.execute(f"{_COLUMNS}{where} ORDER BY id", params))
    return out


def model_page(tx: Tx, session_id: str, after_id: int, limit: int | None = None) -> list[ModelRow]:
    """The rows of the model's view after `after_id`, in order, up to `limit` (None: all of
    them): a long view read a page per call, so other reads go between the pages."""
    out: list[ModelRow] = []
    for where, params in _visible(tx, session_id):
        left = 2**62 if limit is None else limit - len(out)  # (no limit: more than any)
        if left == 0:
            break
        out += ModelRow.from_rows(tx.execute(
            f"{_COLUMNS}{where} AND id > ? ORDER BY id LIMIT ?", (*params, after_id, left)))
    return out


def model_size(tx: Tx, session_id: str) -> tuple[int, int]:
    """(rows, characters) of what the model sees of a session, counted in SQL without reading
    the rows out: the messages and summaries, their wire text only (not their calls).  A
    request built from them is at least this large, less any orphaned tool results it drops."""
    n = chars = 0
    for where, params in _visible(tx, session_id):
        r = tx.one("SELECT count(*), coalesce(sum(length(coalesce(api_content, content))), 0) "
                   f"FROM messages WHERE {where} AND (role != 'system_note' OR note_kind = 'summary')",
                   params)
        assert r is not None
        n, chars = n + int(r[0]), chars + int(r[1])
    return n, chars


def view_token(tx: Tx, session_id: str) -> tuple[int, int, int]:
    """What changes whenever the model's view of a session changes other than by appends: a
    compression in place commits a new compacted range (with its summary, the head's pruned
    wire copy and the previous summary's flag) in the same transaction, and a choice of
    another answer to a prompt (store/answers.py) counts `sessions.view_changes`."""
    r = tx.one("SELECT count(*), coalesce(max(before_id), 0) FROM compacted_ranges "
               "WHERE session_id = ?", (session_id,))
    v = tx.one("SELECT view_changes FROM sessions WHERE session_id = ?", (session_id,))
    ranges = (int(r[0]), int(r[1])) if r is not None else (0, 0)
    return (*ranges, int(v[0]) if v is not None else 0)


def hidden_ranges(tx: Tx, session_id: str) -> list[tuple[int, int]]:
    """The id ranges compressions took out of the model's view (each strictly between its two
    ids), merged and in order."""
    out: list[tuple[int, int]] = []
    for after, before in tx.all("SELECT after_id, before_id FROM compacted_ranges "
                                "WHERE session_id = ? ORDER BY after_id", (session_id,)):
        if out and after < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], before))
        else:
            out.append((after, before))
    return out


def _visible(tx: Tx, session_id: str) -> list[tuple[str, tuple[object, ...]]]:
    """The model's view as WHERE clauses, one per stretch of ids between hidden ranges."""
    out: list[tuple[str, tuple[object, ...]]] = []
    low: int | None = None
    for after, before in hidden_ranges(tx, session_id):
        if low is None:
            out.append((f"{_MODEL_VIEW} AND id <= ?", (session_id, after)))
        elif after >= low:
            out.append((f"{_MODEL_VIEW} AND id BETWEEN ? AND ?", (session_id, low, after)))
        low = before
    if low is None:
        return [(_MODEL_VIEW, (session_id,))]
    return [*out, (f"{_MODEL_VIEW} AND id >= ?", (session_id, low))]


def _hidden(ranges: list[tuple[int, int]], r: MessageRecord) -> bool:
    """Whether a compression took the row out of the model's view (notes other than summaries
    were never in it)."""
    if r.role == "system_note" and r.note_kind != "summary":
        return False
    return any(after < r.id < before for after, before in ranges)


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
