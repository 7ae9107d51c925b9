"""Branches: a session forked at one of another session's prompts, its history copied.

A branch is a new session whose rows are copies of the original's rows before the prompt it
was forked at, in order, each with its answer's `active` flag; the branch names the original
and that prompt (`sessions.forked_from`, `forked_at`, migration 15).  The copy keeps what the
model reads of that history: when no compression summarized anything after the prompt, the
rows it had taken out of the model's view stay out (flagged `compacted`, since the branch has
no compacted ranges) and its summary's `anchor` is moved to the copy of its row; when one did,
the summaries could speak of what the branch does not hold, so every summary is left out and
every row is in (a turn of the branch compresses again when it must).
"""

from __future__ import annotations

import json

from backend.ids import message_id, message_rowid, now
from backend.store.db import Tx
from backend.store.sessions import SessionRecord

_COLUMNS = ("turn_id, role, content, api_content, tool_calls, call_id, tool_name, status, "
            "note_kind, active, {compacted}, created_at, meta, api_tool_calls")
# A row people see compacted: flagged, or inside a compression's range (notes other than
# summaries never were in the model's view, so never leave it).
_HIDDEN = ("CASE WHEN compacted = 1 THEN 1 "
           "WHEN role = 'system_note' AND coalesce(note_kind, '') != 'summary' THEN 0 "
           "WHEN EXISTS (SELECT 1 FROM compacted_ranges c WHERE c.session_id = messages.session_id "
           "AND messages.id > c.after_id AND messages.id < c.before_id) THEN 1 ELSE 0 END")
# Every row in the model's view but summaries (see the module's docstring).
_RAW = "CASE WHEN role = 'system_note' AND note_kind = 'summary' THEN 1 ELSE 0 END"


def insert(tx: Tx, branch_id: str, original: SessionRecord, title: str, at_rowid: int) -> None:
    """The branch's session row: the original's folder, model and frozen system prompt (its
    bytes, so a provider's cache of them still serves), linked to the original's prompt."""
    ts = now()
    tx.execute(
        "INSERT INTO sessions (session_id, title, cwd, model, system_prompt, created_at, "
        "updated_at, titled, forked_from, forked_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
        (branch_id, title, original.cwd, original.model, original.system_prompt, ts, ts,
         original.session_id, message_id(at_rowid)),
    )


def copy_history(tx: Tx, original: str, branch_id: str, before_rowid: int) -> int:
    """Copies the original's rows before `before_rowid` into the branch, in order (one
    statement: a long session's copy is not a row at a time); returns how many."""
    summarized_after = tx.one(
        "SELECT 1 FROM messages WHERE session_id = ? AND id >= ? AND role = 'system_note' "
        "AND note_kind = 'summary' LIMIT 1", (original, before_rowid)) is not None
    cols = _COLUMNS.format(compacted="compacted")
    picked = _COLUMNS.format(compacted=_RAW if summarized_after else _HIDDEN)
    cur = tx.execute(
        f"INSERT INTO messages (session_id, {cols}) SELECT ?, {picked} FROM messages "
        "WHERE session_id = ? AND id < ? ORDER BY id", (branch_id, original, before_rowid))
    copied = max(0, cur.rowcount)
    if not summarized_after:
        _move_anchor(tx, original, branch_id, before_rowid)
    return copied


def _move_anchor(tx: Tx, original: str, branch_id: str, before_rowid: int) -> None:
    """The summary the branch's model reads (its last one) names the row after which it is read
    by id: the id of that row's copy.  Copies keep the originals' order, so the copy of the
    n-th row copied is the branch's n-th row."""
    r = tx.one("SELECT id, meta FROM messages WHERE session_id = ? AND role = 'system_note' "
               "AND note_kind = 'summary' AND compacted = 0 ORDER BY id DESC LIMIT 1", (branch_id,))
    if r is None or not r["meta"]:
        return
    meta = json.loads(r["meta"])
    anchor = int(meta.get("anchor") or 0)
    if anchor <= 0:
        return
    n = tx.one("SELECT count(*) FROM messages WHERE session_id = ? AND id <= ? AND id < ?",
               (original, anchor, before_rowid))
    place = int(n[0]) if n is not None else 0
    copy = tx.one("SELECT id FROM messages WHERE session_id = ? ORDER BY id LIMIT 1 OFFSET ?",
                  (branch_id, max(0, place - 1))) if place else None
    meta["anchor"] = int(copy[0]) if copy is not None else 0
    tx.execute("UPDATE messages SET meta = ? WHERE id = ?", (json.dumps(meta), r["id"]))


def of_messages(tx: Tx, session_id: str, rowids: list[int]) -> dict[int, list[str]]:
    """The branches forked at each of these rows of the session (only rows that have some),
    oldest first."""
    if not rowids:
        return {}
    wanted = {message_id(i) for i in rowids}
    out: dict[int, list[str]] = {}
    for r in tx.all("SELECT session_id, forked_at FROM sessions WHERE forked_from = ? "
                    "ORDER BY created_at, session_id", (session_id,)):
        at = r["forked_at"]
        if at in wanted:
            out.setdefault(message_rowid(at), []).append(str(r["session_id"]))
    return out
