"""The questions table: what the model asked the person, whether it still waits, and the answer."""

from __future__ import annotations

import json

from backend.ids import now
from backend.store import sessions
from backend.store.db import Row, Tx
from backend.store.records import Record, record
from shared.literals import DecidedBy, QuestionStatus


class QuestionRecord(Record, frozen=True):
    """A questions row; `choices` decoded from its JSON list."""

    question_id: str
    session_id: str
    turn_id: str
    call_id: str
    question: str
    choices: tuple[str, ...]
    allow_other: bool
    status: QuestionStatus
    created_at: str
    expires_at: str
    answer: str | None
    choice: int | None
    answered_at: str | None
    answered_by: DecidedBy | None
    followup_admission_id: str | None

    @classmethod
    def from_row(cls, row: Row) -> QuestionRecord:
        return record(cls, row, choices=tuple(json.loads(row["choices"])),
                      allow_other=bool(row["allow_other"]))


def insert(
    tx: Tx, *, question_id: str, session_id: str, turn_id: str, call_id: str, question: str,
    choices: list[str], allow_other: bool, expires_at: str,
) -> QuestionRecord:
    tx.execute(
        "INSERT INTO questions (question_id, session_id, turn_id, call_id, question, choices, "
        "allow_other, status, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
        (question_id, session_id, turn_id, call_id, question,
         json.dumps(choices, ensure_ascii=False), int(allow_other), now(), expires_at),
    )
    sessions.changed(tx, session_id)  # now waiting_answer
    found = row(tx, question_id)
    assert found is not None
    return found


def row(tx: Tx, question_id: str) -> QuestionRecord | None:
    r = tx.one("SELECT * FROM questions WHERE question_id = ?", (question_id,))
    return QuestionRecord.from_row(r) if r is not None else None


def answer(tx: Tx, question_id: str, text: str, choice: int | None) -> bool:
    """Records a person's answer to a pending question; False when it was no longer pending."""
    return _close(tx, question_id, "answered", "user", text, choice)


def close(tx: Tx, question_id: str, status: QuestionStatus, by: DecidedBy) -> bool:
    """Moves a pending question to `expired` (by "timeout") or `cancelled` (by "stopped");
    False when it was no longer pending."""
    return _close(tx, question_id, status, by, None, None)


def _close(tx: Tx, question_id: str, status: QuestionStatus, by: DecidedBy,
           text: str | None, choice: int | None) -> bool:
    cur = tx.execute(
        "UPDATE questions SET status = ?, answered_by = ?, answer = ?, choice = ?, "
        "answered_at = ? WHERE question_id = ? AND status = 'pending'",
        (status, by, text, choice, now(), question_id),
    )
    if cur.rowcount != 1:
        return False
    r = row(tx, question_id)
    assert r is not None
    sessions.changed(tx, r.session_id)  # no longer waiting_answer (if none else pends)
    return True


def set_followup(tx: Tx, question_id: str, admission_id: str) -> None:
    tx.execute("UPDATE questions SET followup_admission_id = ? WHERE question_id = ?",
               (admission_id, question_id))


def pending(tx: Tx, session_id: str | None = None) -> list[QuestionRecord]:
    if session_id is None:
        rows = tx.all("SELECT * FROM questions WHERE status = 'pending' ORDER BY created_at")
    else:
        rows = tx.all(
            "SELECT * FROM questions WHERE status = 'pending' AND session_id = ? "
            "ORDER BY created_at", (session_id,))
    return [QuestionRecord.from_row(r) for r in rows]


def unheard(tx: Tx) -> list[QuestionRecord]:
    """Answered questions whose turn never read the answer: their call's result is `unknown`
    (the turn was marked lost: its process died between the answer and the read, or was
    declared dead while the answer came through another backend), and no follow-up prompt
    carries them yet."""
    rows = tx.all(
        "SELECT q.* FROM questions q JOIN messages m ON m.session_id = q.session_id "
        "AND m.call_id = q.call_id AND m.role = 'tool' "
        "WHERE q.status = 'answered' AND q.followup_admission_id IS NULL "
        "AND m.status = 'unknown' ORDER BY q.answered_at")
    return [QuestionRecord.from_row(r) for r in rows]
