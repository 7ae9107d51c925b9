"""The checkpoints table: a file's content before a tool changed it, by turn, for session.undo."""

from __future__ import annotations

from backend.ids import now
from backend.store.db import Tx
from backend.store.records import Record


class CheckpointRecord(Record, frozen=True):
    """A checkpoints row: `path` as it was before `call_id` changed it (`existed` False: the
    call created it); the content is the blob at `blob_path`, named by `content_hash`."""

    id: int
    session_id: str
    turn_id: str
    call_id: str
    path: str
    existed: bool
    content_hash: str | None
    blob_path: str | None
    restored_at: str | None
    created_at: str


def insert(
    tx: Tx, session_id: str, turn_id: str, call_id: str, path: str, *, existed: bool,
    content_hash: str | None, blob_path: str | None,
) -> None:
    tx.execute(
        "INSERT INTO checkpoints (session_id, turn_id, call_id, path, existed, content_hash, "
        "blob_path, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, turn_id, call_id, path, int(existed), content_hash, blob_path, now()),
    )


def last_turn(tx: Tx, session_id: str) -> str | None:
    """The latest turn with checkpoints not yet restored."""
    r = tx.one(
        "SELECT turn_id FROM checkpoints WHERE session_id = ? AND restored_at IS NULL "
        "ORDER BY id DESC LIMIT 1",
        (session_id,),
    )
    return str(r["turn_id"]) if r else None


def earliest_per_path(tx: Tx, session_id: str, turn_id: str) -> list[CheckpointRecord]:
    """For each path the turn changed, its first checkpoint: the content before the turn."""
    return [CheckpointRecord.from_row(r) for r in tx.all(
        "SELECT c.* FROM checkpoints c JOIN (SELECT path, MIN(id) AS id FROM checkpoints "
        "WHERE session_id = ? AND turn_id = ? AND restored_at IS NULL GROUP BY path) f "
        "ON c.id = f.id ORDER BY c.id",
        (session_id, turn_id),
    )]


def mark_restored(tx: Tx, session_id: str, turn_id: str) -> list[str]:
    """Marks the turn's checkpoints restored; the calls they belonged to, in order."""
    calls = [str(r["call_id"]) for r in tx.all(
        "SELECT call_id, MIN(id) AS first_id FROM checkpoints WHERE session_id = ? AND turn_id = ? "
        "AND restored_at IS NULL GROUP BY call_id ORDER BY first_id",
        (session_id, turn_id),
    )]
    tx.execute(
        "UPDATE checkpoints SET restored_at = ? WHERE session_id = ? AND turn_id = ? "
        "AND restored_at IS NULL",
        (now(), session_id, turn_id),
    )
    return calls
