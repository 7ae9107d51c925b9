"""The messaging doors' tables: rooms bound to sessions, what was sent, acted on, and owed.

A room is bound to one session (`door_rooms`), with `delivered_seq`: the session's events
up to it have been turned into platform messages.  The event log is the door's outbox for
everything a turn says (it is written in the same transaction as the turn's own rows);
`door_outbox` holds what the door itself owes a room (a refusal, a command's answer),
written in the same transaction that decided it.  Both are sent at least once, with a
transaction id derived from what is sent, so the platform drops a repeat.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from backend.ids import now
from backend.store import events
from backend.store.db import Tx


@dataclass(frozen=True)
class Binding:
    room_id: str
    session_id: str
    delivered_seq: int


@dataclass(frozen=True)
class Owed:
    """A door's own message to a room, not yet sent."""

    room_id: str
    key: str
    content: dict[str, Any]


def binding(tx: Tx, door: str, room_id: str) -> Binding | None:
    row = tx.execute(
        "SELECT room_id, session_id, delivered_seq FROM door_rooms WHERE door = ? AND room_id = ?",
        (door, room_id),
    ).fetchone()
    return Binding(row[0], row[1], int(row[2])) if row else None


def bindings(tx: Tx, door: str) -> list[Binding]:
    rows = tx.execute(
        "SELECT room_id, session_id, delivered_seq FROM door_rooms WHERE door = ? "
        "ORDER BY bound_at, room_id", (door,),
    ).fetchall()
    return [Binding(r[0], r[1], int(r[2])) for r in rows]


def rooms_of(tx: Tx, session_id: str) -> list[tuple[str, str]]:
    """(door, room id) of every room bound to the session."""
    rows = tx.execute(
        "SELECT door, room_id FROM door_rooms WHERE session_id = ?", (session_id,)
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def bind(tx: Tx, door: str, room_id: str, session_id: str) -> Binding:
    """Binds the room to the session from the session's next event on: what was said there
    before is not sent to the room.  Replaces an earlier binding of the room."""
    seq = events.latest_seq(tx, session_id)
    tx.execute(
        "INSERT INTO door_rooms (door, room_id, session_id, delivered_seq, bound_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (door, room_id) DO UPDATE SET "
        "session_id = excluded.session_id, delivered_seq = excluded.delivered_seq, "
        "bound_at = excluded.bound_at",
        (door, room_id, session_id, seq, now()),
    )
    return Binding(room_id, session_id, seq)


def move(tx: Tx, door: str, room_id: str, parent: str, child: str) -> None:
    """The room follows its conversation from `parent` into `child`, from that session's first
    event (only while the room is still bound to `parent`)."""
    tx.execute("UPDATE door_rooms SET session_id = ?, delivered_seq = 0 "
               "WHERE door = ? AND room_id = ? AND session_id = ?", (child, door, room_id, parent))


def delivered(tx: Tx, door: str, room_id: str, session_id: str, seq: int) -> None:
    """The room has been sent the session's events up to `seq` (never moves back, and only
    while the room is still bound to that session)."""
    tx.execute(
        "UPDATE door_rooms SET delivered_seq = ? WHERE door = ? AND room_id = ? "
        "AND session_id = ? AND delivered_seq < ?",
        (seq, door, room_id, session_id, seq),
    )


def sent_id(tx: Tx, door: str, room_id: str, key: str) -> str | None:
    row = tx.execute(
        "SELECT event_id FROM door_sent WHERE door = ? AND room_id = ? AND key = ?",
        (door, room_id, key),
    ).fetchone()
    return str(row[0]) if row else None


def key_of(tx: Tx, door: str, event_id: str) -> str | None:
    """Which message of ours (its key) the platform's `event_id` is."""
    row = tx.execute(
        "SELECT key FROM door_sent WHERE door = ? AND event_id = ?", (door, event_id)
    ).fetchone()
    return str(row[0]) if row else None


def record_sent(tx: Tx, door: str, room_id: str, key: str, event_id: str) -> None:
    """`event_id` "" records that a post is being made, before it is: see Door._post_once."""
    tx.execute(
        "INSERT INTO door_sent (door, room_id, key, event_id) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (door, room_id, key) DO UPDATE SET event_id = excluded.event_id",
        (door, room_id, key, event_id),
    )


def owe(tx: Tx, door: str, room_id: str, key: str, content: dict[str, Any]) -> bool:
    """Queues the door's own message; a key already queued (or sent) is not queued again,
    which is how a stranger gets one refusal however often they write."""
    cur = tx.execute(
        "INSERT INTO door_outbox (door, room_id, key, content, queued_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (door, room_id, key) DO NOTHING RETURNING key",
        (door, room_id, key, json.dumps(content), time.time()),
    )
    return cur.fetchone() is not None


def owed(tx: Tx, door: str, limit: int = 50) -> list[Owed]:
    rows = tx.execute(
        "SELECT room_id, key, content FROM door_outbox WHERE door = ? AND sent_at IS NULL "
        "ORDER BY queued_at, key LIMIT ?", (door, limit),
    ).fetchall()
    return [Owed(r[0], r[1], json.loads(r[2])) for r in rows]


def paid(tx: Tx, door: str, room_id: str, key: str) -> None:
    tx.execute(
        "UPDATE door_outbox SET sent_at = ? WHERE door = ? AND room_id = ? AND key = ?",
        (time.time(), door, room_id, key),
    )


def claim(tx: Tx, door: str, event_id: str) -> bool:
    """Marks a platform message as acted on; False when it already was (a redelivery)."""
    cur = tx.execute(
        "INSERT INTO door_inbox (door, event_id, handled_at) VALUES (?, ?, ?) "
        "ON CONFLICT (door, event_id) DO NOTHING RETURNING event_id",
        (door, event_id, time.time()),
    )
    return cur.fetchone() is not None


def cursor(tx: Tx, door: str) -> str | None:
    row = tx.execute("SELECT since FROM door_cursor WHERE door = ?", (door,)).fetchone()
    return str(row[0]) if row else None


def save_cursor(tx: Tx, door: str, since: str) -> None:
    tx.execute(
        "INSERT INTO door_cursor (door, since) VALUES (?, ?) "
        "ON CONFLICT (door) DO UPDATE SET since = excluded.since",
        (door, since),
    )


def admitted(tx: Tx, principal: str, request_id: str) -> bool:
    """Whether a platform message was admitted already, in any session (its id is unique on
    the platform): a redelivered file is then not downloaded again."""
    return tx.one("SELECT 1 FROM admissions WHERE principal = ? AND request_id = ? LIMIT 1",
                  (principal, request_id)) is not None
