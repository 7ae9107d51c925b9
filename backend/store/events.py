"""The events table: each session's stored event log with a gapless per-session seq."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from backend.ids import now
from backend.store.db import Tx
from shared.protocol import Event


@dataclass(frozen=True)
class StoredEvent:
    """An event committed to the log (or, for session-less events, broadcast only)."""

    event: Event
    stored: bool = True


@dataclass(frozen=True)
class Moved:
    """Published when a session's conversation continues in another (compression's rotation):
    whoever follows `parent` follows `child` from then on, before any of the child's events."""

    parent: str
    child: str


def append(
    tx: Tx,
    session_id: str,
    type_: str,
    data: dict[str, Any] | msgspec.Struct,
    *,
    turn_id: str | None = None,
    admission_id: str | None = None,
) -> Event:
    """Stores the event with the session's next seq and queues it for publishing on commit.

    The seq is read inside the same transaction, so concurrent writers (all
    funnelled through one writer connection) can never take the same number.
    """
    data = as_data(data)
    seq = latest_seq(tx, session_id) + 1
    ts = now()
    tx.execute(
        "INSERT INTO events (session_id, seq, type, turn_id, admission_id, ts, data) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, seq, type_, turn_id, admission_id, ts, json.dumps(data)),
    )
    event = Event(
        session_id=session_id, seq=seq, type=type_, ts=ts, data=data,
        turn_id=turn_id, admission_id=admission_id,
    )
    tx.publish(StoredEvent(event))
    return event


def broadcast(
    tx: Tx, session_id: str, type_: str, data: dict[str, Any] | msgspec.Struct, *,
    turn_id: str | None = None, admission_id: str | None = None,
) -> None:
    """Queues a session-less event (no seq, not stored) for every reader, on commit."""
    event = Event(session_id=session_id, type=type_, ts=now(), data=as_data(data),
                  turn_id=turn_id, admission_id=admission_id)
    tx.publish(StoredEvent(event, False))


def as_data(data: dict[str, Any] | msgspec.Struct) -> dict[str, Any]:
    """Event data as plain JSON values: typed event structs are converted here, once."""
    if isinstance(data, msgspec.Struct):
        out: dict[str, Any] = msgspec.to_builtins(data)
        return out
    return data


def latest_seq(tx: Tx, session_id: str) -> int:
    row = tx.one("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,))
    return int(row[0] or 0) if row else 0


def since(tx: Tx, session_id: str, since_seq: int, limit: int) -> list[Event]:
    rows = tx.all(
        "SELECT seq, type, turn_id, admission_id, ts, data FROM events "
        "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, since_seq, limit),
    )
    return [
        Event(
            session_id=session_id, seq=r["seq"], type=r["type"], ts=r["ts"],
            data=json.loads(r["data"]), turn_id=r["turn_id"], admission_id=r["admission_id"],
        )
        for r in rows
    ]


def turn_text(tx: Tx, session_id: str, turn_id: str) -> str:
    """The text streamed to clients for the turn's last assistant message: its message.delta
    events after the last tool event (text before a tool round is stored with its calls)."""
    rows = tx.all(
        "SELECT data FROM events WHERE session_id = ? AND turn_id = ? AND type = 'message.delta' "
        "AND seq > (SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ? AND turn_id = ? "
        "AND type LIKE 'tool.%') ORDER BY seq",
        (session_id, turn_id, session_id, turn_id),
    )
    return "".join(json.loads(r["data"]).get("text", "") for r in rows)
