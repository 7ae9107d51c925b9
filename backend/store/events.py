"""The events table: each session's stored event log with a gapless per-session seq.

A long text an event repeats from its admission's row (the answer in
`message.complete` and a receipt's `final_text`, the prompt in a receipt's
`text`) is stored once, in that row: the stored event holds a reference in its
place, and `since` puts the text back.  Live subscribers get the event whole.

The store speaks in `EventRecord`s (an event as stored, or a session-less broadcast); the
wire's `Event` is built from one at the edge (backend/wire.py), never here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from backend.ids import now
from backend.store.db import Tx

INLINE_MAX = 4096  # characters; a shared text longer than this is stored by reference
_REF = "$admission"  # {"$admission": "final_text"}: that text of the event's admission row
# Where each type's shared texts sit in its data, and which text of the row they are.
_SHARED: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "message.complete": ((("text",), "final_text"),),
    "admission.queued": ((("receipt", "text"), "text"),),
    "admission.settled": ((("receipt", "text"), "text"), (("receipt", "final_text"), "final_text")),
}


class EventRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An event: a row of the log (`seq` set), or a session-less broadcast (`seq` None).
    Its fields are the wire event's, by name and order; `data` is plain JSON values."""

    session_id: str
    type: str
    ts: str
    data: dict[str, Any]
    seq: int | None = None
    turn_id: str | None = None
    admission_id: str | None = None


@dataclass(frozen=True)
class StoredEvent:
    """An event committed to the log (or, for session-less events, broadcast only)."""

    event: EventRecord
    stored: bool = True


class Report(msgspec.Struct, frozen=True, kw_only=True, tag_field="report"):
    """What a committed job changed that every reader hears of: the store reports it (in
    its own records), published on commit like an event; the edge (backend/wire.py) turns
    it into the wire's broadcast.  `ts`: when it was reported, the broadcast's time."""

    ts: str


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
) -> EventRecord:
    """Stores the event with the session's next seq and queues it for publishing on commit.

    The seq is read inside the same transaction, so concurrent writers (all
    funnelled through one writer connection) can never take the same number.
    """
    data = as_data(data)
    seq = latest_seq(tx, session_id) + 1
    ts = now()
    stored = _by_reference(tx, type_, data, admission_id)
    tx.execute(
        "INSERT INTO events (session_id, seq, type, turn_id, admission_id, ts, data) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, seq, type_, turn_id, admission_id, ts, json.dumps(stored)),
    )
    event = EventRecord(
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
    event = EventRecord(session_id=session_id, type=type_, ts=now(), data=as_data(data),
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


def since(tx: Tx, session_id: str, since_seq: int, limit: int) -> list[EventRecord]:
    rows = tx.all(
        "SELECT seq, type, turn_id, admission_id, ts, data FROM events "
        "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, since_seq, limit),
    )
    texts = _AdmissionTexts(tx)
    return [
        EventRecord(
            session_id=session_id, seq=r["seq"], type=r["type"], ts=r["ts"],
            data=_resolved(texts, r["type"], json.loads(r["data"]), r["admission_id"]),
            turn_id=r["turn_id"], admission_id=r["admission_id"],
        )
        for r in rows
    ]


def _by_reference(
    tx: Tx, type_: str, data: dict[str, Any], admission_id: str | None
) -> dict[str, Any]:
    """`data` as stored: each long shared text that its admission's row holds (checked, so a
    reference always resolves to the very text) replaced by a reference."""
    shared = _SHARED.get(type_)
    if not shared or admission_id is None:
        return data
    out = data
    texts = _AdmissionTexts(tx)
    for path, name in shared:
        value = _get(out, path)
        if isinstance(value, str) and len(value) > INLINE_MAX \
                and texts.get(admission_id, name) == value:
            out = _put(out, path, {_REF: name})
    return out


def _resolved(
    texts: _AdmissionTexts, type_: str, data: dict[str, Any], admission_id: str | None
) -> dict[str, Any]:
    for path, name in _SHARED.get(type_, ()):
        if _get(data, path) == {_REF: name} and admission_id is not None:
            data = _put(data, path, texts.get(admission_id, name))
    return data


class _AdmissionTexts:
    """The shared texts of admission rows, read once each."""

    def __init__(self, tx: Tx) -> None:
        self._tx = tx
        self._rows: dict[str, dict[str, str | None]] = {}

    def get(self, admission_id: str, name: str) -> str | None:
        if admission_id not in self._rows:
            r = self._tx.one("SELECT payload_json, final_text FROM admissions "
                             "WHERE admission_id = ?", (admission_id,))
            self._rows[admission_id] = {} if r is None else {
                "text": json.loads(r["payload_json"]).get("text"), "final_text": r["final_text"]}
        return self._rows[admission_id].get(name)


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = data
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of `data` with `value` at `path` (the original may be the live event's)."""
    head, *rest = path
    inner = data.get(head)
    return {**data, head: _put(inner, tuple(rest), value) if rest and isinstance(inner, dict)
            else value}


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
