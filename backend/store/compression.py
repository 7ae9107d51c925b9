"""Compression's durable state: the one-compressor-per-session lock and each session's guards."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from backend.store.db import Tx
from backend.store.leases import Holder, LeaseRecord

LOCK_TTL_S = 600.0  # longer than a summary call may take; a dead holder is reclaimed sooner


@dataclass(frozen=True)
class Guards:
    """A session's compression guards, as stored (times are Unix seconds)."""

    failures: int = 0  # summary calls that failed in a row: the cooldown grows with them
    cooldown_until: float = 0.0
    ineffective: int = 0  # compressions in a row that left the request over the threshold
    probe_after: float = 0.0  # with two ineffective ones: no automatic compression before this


def guards(tx: Tx, session_id: str) -> Guards:
    r = tx.one("SELECT compress_failures, compress_cooldown_until, compress_ineffective, "
               "compress_probe_after FROM sessions WHERE session_id = ?", (session_id,))
    if r is None:
        return Guards()
    return Guards(int(r[0]), float(r[1]), int(r[2]), float(r[3]))


def set_guards(tx: Tx, session_id: str, g: Guards) -> None:
    tx.execute(
        "UPDATE sessions SET compress_failures = ?, compress_cooldown_until = ?, "
        "compress_ineffective = ?, compress_probe_after = ? WHERE session_id = ?",
        (g.failures, g.cooldown_until, g.ineffective, g.probe_after, session_id),
    )


def lock_row(tx: Tx, session_id: str) -> LeaseRecord | None:
    r = tx.one("SELECT * FROM compression_locks WHERE session_id = ?", (session_id,))
    return LeaseRecord.from_row(r) if r is not None else None


def put_lock(tx: Tx, session_id: str, holder: Holder, ttl: float = LOCK_TTL_S) -> None:
    now = time.time()
    tx.execute(
        "INSERT INTO compression_locks (session_id, holder, pid, boot_token, acquired_at, "
        "expires_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
        "holder = excluded.holder, pid = excluded.pid, boot_token = excluded.boot_token, "
        "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
        (session_id, holder.encode(), holder.pid, holder.boot_token, now, now + ttl))


def release_lock(tx: Tx, session_id: str, holder: Holder) -> None:
    tx.execute("DELETE FROM compression_locks WHERE session_id = ? AND holder = ?",
               (session_id, holder.encode()))


def hide(tx: Tx, session_id: str, after_id: int, before_id: int) -> None:
    """Takes every row strictly between the two ids (a compression's middle) out of the
    model's view; people still see them, marked compacted (messages.hidden_ranges)."""
    tx.execute("INSERT INTO compacted_ranges (session_id, after_id, before_id) "
               "VALUES (?, ?, ?) ON CONFLICT DO NOTHING", (session_id, after_id, before_id))


def compact(tx: Tx, session_id: str, ids: list[int]) -> None:
    """Marks rows as compacted: people still see them; the model no longer does."""
    for chunk in range(0, len(ids), 500):
        part = ids[chunk:chunk + 500]
        tx.execute(
            f"UPDATE messages SET compacted = 1 WHERE session_id = ? AND id IN "
            f"({','.join('?' * len(part))})", (session_id, *part))


def set_wire(
    tx: Tx, row_id: int, api_content: str | None, api_tool_calls: list[dict[str, Any]] | None,
) -> None:
    """What the model is sent for a row from now on (pruned), where it differs from the row."""
    tx.execute("UPDATE messages SET api_content = ?, api_tool_calls = ? WHERE id = ?",
               (api_content, json.dumps(api_tool_calls) if api_tool_calls is not None else None, row_id))


def copy_row(tx: Tx, session_id: str, row_id: int) -> int:
    """Copies a stored row into another session (rotation); returns the new row id."""
    cur = tx.execute(
        "INSERT INTO messages (session_id, turn_id, role, content, api_content, status, note_kind, "
        "tool_calls, api_tool_calls, call_id, tool_name, meta, created_at) "
        "SELECT ?, turn_id, role, content, api_content, status, note_kind, tool_calls, "
        "api_tool_calls, call_id, tool_name, meta, created_at FROM messages WHERE id = ? "
        "RETURNING id",
        (session_id, row_id))
    return int(cur.fetchone()[0])


def move_queue(tx: Tx, parent: str, child: str) -> None:
    """The parent's open admissions continue in the child: queued, running, and any whose
    outcome is unknown (it still holds the queue until the person moves on there)."""
    tx.execute("UPDATE admissions SET session_id = ? WHERE session_id = ? "
               "AND status IN ('queued', 'started', 'unknown')", (child, parent))


def leaf(tx: Tx, session_id: str) -> str:
    """The newest session of a lineage: where a rotated conversation continues."""
    seen = {session_id}
    while True:
        r = tx.one("SELECT c.session_id FROM sessions p JOIN sessions c "
                   "ON c.session_id = p.child_session_id WHERE p.session_id = ?", (session_id,))
        child = r[0] if r is not None else None  # (a deleted child ends the chain)
        if not child or child in seen:
            return session_id
        seen.add(child)
        session_id = child
