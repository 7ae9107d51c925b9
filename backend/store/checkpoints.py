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


def earliest_per_path(tx: Tx, session_id: str, turn_id: str,
                      paths: list[str] | None = None) -> list[CheckpointRecord]:
    """For each path the turn changed (or each of `paths`) and that is not restored yet, its
    first checkpoint: the content before the turn."""
    only, args = _only(paths)
    return [CheckpointRecord.from_row(r) for r in tx.all(
        "SELECT c.* FROM checkpoints c JOIN (SELECT path, MIN(id) AS id FROM checkpoints "
        f"WHERE session_id = ? AND turn_id = ? AND restored_at IS NULL{only} GROUP BY path) f "
        "ON c.id = f.id ORDER BY c.id",
        (session_id, turn_id, *args),
    )]


def paths_of_turn(tx: Tx, session_id: str, turn_id: str) -> set[str]:
    """Every path the turn changed, restored or not."""
    return {str(r["path"]) for r in tx.all(
        "SELECT DISTINCT path FROM checkpoints WHERE session_id = ? AND turn_id = ?",
        (session_id, turn_id))}


def newest_turns(tx: Tx, session_id: str, limit: int) -> tuple[list[str], bool]:
    """The last `limit` turns that changed files, oldest first, and whether older ones did."""
    rows = tx.all(
        "SELECT turn_id, MIN(id) AS first_id FROM checkpoints WHERE session_id = ? "
        "GROUP BY turn_id ORDER BY first_id DESC LIMIT ?",
        (session_id, limit + 1),
    )
    return [str(r["turn_id"]) for r in reversed(rows[:limit])], len(rows) > limit


def of_turns(tx: Tx, session_id: str, turn_ids: list[str]) -> list[CheckpointRecord]:
    """Every checkpoint of these turns, in the order they were taken."""
    if not turn_ids:
        return []
    marks = ", ".join("?" for _ in turn_ids)
    return [CheckpointRecord.from_row(r) for r in tx.all(
        f"SELECT * FROM checkpoints WHERE session_id = ? AND turn_id IN ({marks}) ORDER BY id",
        (session_id, *turn_ids),
    )]


def first_per_path_of(tx: Tx, session_id: str, turn_ids: list[str]) -> list[CheckpointRecord]:
    """For each path any of the turns changed, its first checkpoint among them (restored or
    not): the content before the first of their changes, what it was when they began."""
    out: dict[str, CheckpointRecord] = {}
    for chunk in range(0, len(turn_ids), 500):
        part = turn_ids[chunk:chunk + 500]
        for r in tx.all(
            "SELECT * FROM checkpoints WHERE session_id = ? AND turn_id IN "
            f"({','.join('?' * len(part))}) ORDER BY id", (session_id, *part)):
            row = CheckpointRecord.from_row(r)
            if row.path not in out or row.id < out[row.path].id:
                out[row.path] = row
    return sorted(out.values(), key=lambda c: c.id)


def paths_of(tx: Tx, session_id: str, turn_id: str) -> set[str]:
    """The paths the turn's checkpoints not yet restored are of."""
    return {str(r[0]) for r in tx.all(
        "SELECT DISTINCT path FROM checkpoints WHERE session_id = ? AND turn_id = ? "
        "AND restored_at IS NULL", (session_id, turn_id))}


def mark_restored(tx: Tx, session_id: str, turn_id: str, paths: list[str] | None = None) -> list[str]:
    """Marks the turn's checkpoints (of `paths` only, when given) restored; the calls they
    belonged to, in order."""
    only, args = _only(paths)
    calls = [str(r["call_id"]) for r in tx.all(
        "SELECT call_id, MIN(id) AS first_id FROM checkpoints WHERE session_id = ? AND turn_id = ? "
        f"AND restored_at IS NULL{only} GROUP BY call_id ORDER BY first_id",
        (session_id, turn_id, *args),
    )]
    tx.execute(
        "UPDATE checkpoints SET restored_at = ? WHERE session_id = ? AND turn_id = ? "
        f"AND restored_at IS NULL{only}",
        (now(), session_id, turn_id, *args),
    )
    return calls


def _only(paths: list[str] | None) -> tuple[str, tuple[str, ...]]:
    """The SQL condition (and its arguments) that keeps rows of `paths` (None: every path)."""
    if paths is None:
        return "", ()
    return f" AND path IN ({', '.join('?' for _ in paths)})", tuple(paths)
