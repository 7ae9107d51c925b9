"""The admissions table: the durable FIFO of accepted input and each item's receipt."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from backend.ids import now
from backend.store import attachments, sessions
from backend.store.db import POSTGRESQL, SQLITE, Cursor, Row, Tx
from backend.store.records import Record
from shared.literals import AdmissionOutcome, AdmissionStatus

# The principal of a scheduled prompt's admissions starts with this ("schedule:<id>"); no
# token's id does, so its request ids can never meet a client's.
SCHEDULED = "schedule:"
# The principal of the background review's admissions (turn/review.py), request id
# "review:<the reviewed turn's id>"; no token's id is this word.
REVIEW = "review"


class AdmissionRecord(Record, frozen=True):
    """An admissions row; `id` is its place in the FIFO."""

    id: int
    admission_id: str
    principal: str
    session_id: str
    request_id: str
    payload_json: str
    payload_digest: str
    status: AdmissionStatus
    outcome: AdmissionOutcome | None
    owner_epoch: int | None
    turn_id: str | None
    created_at: str
    started_at: str | None
    settled_at: str | None
    final_text: str | None
    failure_reason: str | None


def _one(r: Row | None) -> AdmissionRecord | None:
    return AdmissionRecord.from_row(r) if r is not None else None


def by_key(tx: Tx, principal: str, session_id: str, request_id: str) -> AdmissionRecord | None:
    return _one(tx.one(
        "SELECT * FROM admissions WHERE principal = ? AND session_id = ? AND request_id = ?",
        (principal, session_id, request_id),
    ))


def by_id(tx: Tx, admission_id: str) -> AdmissionRecord | None:
    return _one(tx.one("SELECT * FROM admissions WHERE admission_id = ?", (admission_id,)))


def insert(
    tx: Tx, admission_id: str, principal: str, session_id: str, request_id: str,
    payload_json: str, digest: str,
) -> None:
    # Only the session's first open row changes its status (idle -> queued); behind a
    # queued, started or unknown one its summary stays as it is, and is not re-announced.
    held = tx.one(
        "SELECT 1 FROM admissions WHERE session_id = ? AND status IN ('queued', 'started', "
        "'unknown') LIMIT 1",
        (session_id,),
    )
    tx.execute(
        "INSERT INTO admissions (admission_id, principal, session_id, request_id, payload_json, "
        "payload_digest, status, created_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)",
        (admission_id, principal, session_id, request_id, payload_json, digest, now()),
    )
    if held is None:
        sessions.changed(tx, session_id)


def blocking(tx: Tx, session_id: str) -> AdmissionRecord | None:
    """A row that holds the session's queue: one started (by this process) or unknown."""
    return _one(tx.one(
        "SELECT * FROM admissions WHERE session_id = ? AND status IN ('started', 'unknown') "
        "ORDER BY id LIMIT 1",
        (session_id,),
    ))


# A row whose payload is a steer (authority/payload.py).  PostgreSQL cannot parse JSON that
# escapes a NUL (a prompt may hold one), so there the payload's own text is matched: it is
# json.dumps with sorted keys and default separators, where a quote inside a string is always
# escaped, so no text a person sends can spell `"intent": "steer"`.
_STEER = {
    SQLITE: "json_extract(payload_json, '$.intent') IS 'steer'",
    POSTGRESQL: "payload_json LIKE '%\"intent\": \"steer\"%'",
}


def lock_queue(tx: Tx, session_id: str) -> bool:
    """Takes the session's queue for this transaction's claim; False when another backend
    is claiming from it right now (it will run what is queued, so this one moves on).

    On SQLite the single writer already runs one claim at a time.  On PostgreSQL the
    session's row is locked with SKIP LOCKED: claims of one session serialize (its queue
    stays first in, first out), and a second backend skips instead of waiting."""
    if tx.dialect == SQLITE:
        return True
    return tx.one("SELECT 1 FROM sessions WHERE session_id = ? FOR UPDATE SKIP LOCKED",
                  (session_id,)) is not None


def oldest_queued(tx: Tx, session_id: str) -> AdmissionRecord | None:
    """The session's next turn: the oldest queued steer (its turn ended before it could
    join it, so it runs next, ahead of prompts queued for after), else the oldest queued."""
    return _one(tx.one(
        f"SELECT * FROM admissions WHERE session_id = ? AND status = 'queued' "
        f"ORDER BY {_STEER[tx.dialect]} DESC, id LIMIT 1",
        (session_id,),
    ))


def queued_steers(tx: Tx, session_id: str) -> list[AdmissionRecord]:
    """The session's queued steers, oldest first: what the running turn takes in next."""
    return [AdmissionRecord.from_row(r) for r in tx.all(
        f"SELECT * FROM admissions WHERE session_id = ? AND status = 'queued' AND {_STEER[tx.dialect]} "
        "ORDER BY id",
        (session_id,),
    )]


def steer_queued(tx: Tx, session_id: str) -> bool:
    return tx.one(f"SELECT 1 FROM admissions WHERE session_id = ? AND status = 'queued' AND "
                  f"{_STEER[tx.dialect]} LIMIT 1", (session_id,)) is not None


def text_of(r: AdmissionRecord) -> str:
    """The input as admitted (normalized)."""
    return str(json.loads(r.payload_json)["text"])


def cancel_queued_reviews(tx: Tx, session_id: str) -> list[str]:
    """Settles the session's queued reviews `cancelled` (a person's input goes first: a review
    never delays it); returns their ids."""
    ids = [str(r[0]) for r in tx.all(
        "SELECT admission_id FROM admissions WHERE session_id = ? AND status = 'queued' "
        "AND principal = ?", (session_id, REVIEW))]
    for admission_id in ids:
        settle(tx, admission_id, "cancelled", failure_reason="a newer prompt came first")
    return ids


def open_rows(tx: Tx, session_id: str) -> bool:
    """Whether anything of the session is queued, started or unknown."""
    return tx.one("SELECT 1 FROM admissions WHERE session_id = ? AND status IN ('queued', "
                  "'started', 'unknown') LIMIT 1", (session_id,)) is not None


def joined(tx: Tx, session_id: str, turn_id: str, admission_id: str) -> list[str]:
    """The steers that joined a turn: its `started` admissions other than its own."""
    return [r[0] for r in tx.all(
        "SELECT admission_id FROM admissions WHERE session_id = ? AND status = 'started' "
        "AND turn_id = ? AND admission_id != ? ORDER BY id",
        (session_id, turn_id, admission_id),
    )]


def of_turn(tx: Tx, session_id: str, turn_id: str) -> str | None:
    """The admission_id a turn runs for (looked up within its session first: indexed)."""
    # The turn's own admission is its first; steers that joined it come after.
    r = tx.one("SELECT admission_id FROM admissions WHERE session_id = ? AND turn_id = ? "
               "ORDER BY id LIMIT 1", (session_id, turn_id))
    if r is None:  # the admission moved with a rotation the approval row did not follow
        r = tx.one("SELECT admission_id FROM admissions WHERE turn_id = ? ORDER BY id LIMIT 1",
                   (turn_id,))
    return str(r[0]) if r is not None else None


def turned_before(tx: Tx, session_id: str, turn_id: str) -> bool:
    """Whether the session had a turn before `turn_id` (its session_start hooks ran then)."""
    return tx.one("SELECT 1 FROM admissions WHERE session_id = ? AND turn_id IS NOT NULL "
                  "AND turn_id != ? LIMIT 1", (session_id, turn_id)) is not None


def mark_started(tx: Tx, admission_id: str, epoch: int, turn_id: str) -> None:
    cur = tx.execute(
        "UPDATE admissions SET status = 'started', owner_epoch = ?, turn_id = ?, started_at = ? "
        "WHERE admission_id = ? AND status = 'queued'",
        (epoch, turn_id, now(), admission_id),
    )
    _changed(tx, cur, admission_id)


def settle(
    tx: Tx, admission_id: str, outcome: AdmissionOutcome, *, final_text: str | None = None,
    failure_reason: str | None = None,
) -> None:
    cur = tx.execute(
        "UPDATE admissions SET status = 'terminal', outcome = ?, settled_at = ?, final_text = ?, "
        "failure_reason = ? WHERE admission_id = ? AND status != 'terminal'",
        (outcome, now(), final_text, failure_reason, admission_id),
    )
    _changed(tx, cur, admission_id)


def orphan_started(tx: Tx, epoch: int) -> list[AdmissionRecord]:
    """Rows started by an earlier process: their outcome is not known."""
    return [AdmissionRecord.from_row(r) for r in tx.all(
        "SELECT * FROM admissions WHERE status = 'started' AND owner_epoch < ? ORDER BY id",
        (epoch,),
    )]


def mark_unknown(tx: Tx, admission_id: str) -> None:
    cur = tx.execute(
        "UPDATE admissions SET status = 'unknown' WHERE admission_id = ? AND status = 'started'",
        (admission_id,),
    )
    _changed(tx, cur, admission_id)


def _changed(tx: Tx, cur: Cursor, admission_id: str) -> None:
    """A row's status moved, and with it maybe its session's status: announce the session."""
    if cur.rowcount:
        r = tx.one("SELECT session_id FROM admissions WHERE admission_id = ?", (admission_id,))
        if r is not None:
            sessions.changed(tx, r[0])


def unknown_ids(tx: Tx, session_id: str) -> list[str]:
    """The session's admissions whose outcome is unknown (each holds its queue)."""
    return [
        r["admission_id"] for r in tx.all(
            "SELECT admission_id FROM admissions WHERE session_id = ? AND status = 'unknown'",
            (session_id,),
        )
    ]


def unknown_turns(tx: Tx, session_id: str) -> list[str]:
    """The session's admissions whose outcome is unknown and that had started a turn."""
    return [
        r["admission_id"] for r in tx.all(
            "SELECT admission_id FROM admissions WHERE session_id = ? "
            "AND status = 'unknown' AND turn_id IS NOT NULL", (session_id,),
        )
    ]


def queued_count(tx: Tx, session_id: str) -> int:
    row = tx.one("SELECT COUNT(*) FROM admissions WHERE session_id = ? AND status = 'queued'",
                 (session_id,))
    return int(row[0]) if row and row[0] else 0


def any_queued(tx: Tx) -> bool:
    """Whether any session has queued input."""
    return tx.one("SELECT 1 FROM admissions WHERE status = 'queued' LIMIT 1") is not None


def queued_of_principals(tx: Tx, prefix: str) -> list[tuple[str, str]]:
    """(admission, principal) of the queued admissions whose principal starts with `prefix`
    (an internal one)."""
    return [(r[0], r[1]) for r in tx.all(
        "SELECT admission_id, principal FROM admissions WHERE status = 'queued' "
        "AND substr(principal, 1, ?) = ?", (len(prefix), prefix))]


def started_of_turn(tx: Tx, session_id: str, turn_id: str) -> list[AdmissionRecord]:
    """The turn's `started` rows: the admission its claim started first, then the steers
    that joined it."""
    return [AdmissionRecord.from_row(r) for r in tx.all(
        "SELECT * FROM admissions WHERE session_id = ? AND turn_id = ? AND status = 'started' "
        "ORDER BY started_at, id",  # the claim started it; steers joined it later
        (session_id, turn_id))]


def started_of_others(tx: Tx, epoch: int) -> list[AdmissionRecord]:
    """Rows started by another process than this epoch's."""
    return [AdmissionRecord.from_row(r) for r in tx.all(
        "SELECT * FROM admissions WHERE status = 'started' AND owner_epoch <> ? ORDER BY id",
        (epoch,),
    )]


def sessions_queued_before(tx: Tx, created_before: str) -> list[str]:
    """Sessions with an admission queued since before `created_before` (RFC 3339 UTC)."""
    return [r[0] for r in tx.all(
        "SELECT DISTINCT session_id FROM admissions WHERE status = 'queued' AND created_at < ?",
        (created_before,))]


def sessions_with_queued(tx: Tx) -> list[str]:
    return [
        r[0]
        for r in tx.all("SELECT DISTINCT session_id FROM admissions WHERE status = 'queued'")
    ]


def list_for(tx: Tx, session_id: str, status: str | None) -> list[AdmissionRecord]:
    if status is None:
        rows = tx.all("SELECT * FROM admissions WHERE session_id = ? ORDER BY id", (session_id,))
    else:
        rows = tx.all(
            "SELECT * FROM admissions WHERE session_id = ? AND status = ? ORDER BY id",
            (session_id, status),
        )
    return [AdmissionRecord.from_row(r) for r in rows]


class ReceiptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An admission as its receipt shows it: the row, its place in the queue (1 is next;
    None unless queued), the admitted text and intent, and where it came from (`origin`:
    "schedule:<id>" for a scheduled prompt's, else None)."""

    row: AdmissionRecord
    duplicate: bool
    position: int | None
    text: str | None
    steer: bool
    origin: str | None
    regenerates: str | None = None  # session.regenerate's: the prompt's message_id
    attachments: list[dict[str, Any]] | None = None  # the files it names (MessageAttachment's)


def receipt(tx: Tx, r: AdmissionRecord, *, duplicate: bool = False) -> ReceiptRecord:
    payload = json.loads(r.payload_json)
    position = None
    if r.status == "queued":
        ahead = tx.one(
            "SELECT COUNT(*) FROM admissions WHERE session_id = ? AND status = 'queued' AND id < ?",
            (r.session_id, r.id),
        )
        position = int(ahead[0]) + 1 if ahead else 1
    return ReceiptRecord(
        row=r, duplicate=duplicate, position=position, text=payload.get("text"),
        steer=payload.get("intent") == "steer",
        origin=r.principal if r.principal.startswith(SCHEDULED) else None,
        regenerates=payload.get("regenerate"),
        attachments=attachments.of_admission(tx, r.admission_id)
        if payload.get("attachments") else None,
    )
