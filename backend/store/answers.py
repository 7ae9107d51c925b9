"""A prompt's answers: which turns answer which prompt, and which one the model reads.

A prompt is a `user` row that opened its turn (a steer's row, `meta.steer`, joined a turn
already running and belongs to that turn's answer).  Its exchange is every row after it up to
the next prompt: the rows of its own turn, then those of each turn that answered it again
(`session.regenerate` runs a turn that stores no user row).  Each of these turns is one
answer.  The rows of all answers but the one shown are not `active`, so the model, which reads
only active rows (`messages.for_model`), reads one answer; people page through them.  Notes
that belong to the session rather than to an answer (a compression's summary, a rotation's
`continued`, a `notice`) stay active whichever answer is shown.

Showing another answer moves rows in and out of the model's view in the middle of the
transcript, so it also counts `sessions.view_changes`, which `messages.view_token` reads: a
view kept between requests (turn/transcript.py) is then rebuilt.
"""

from __future__ import annotations

import json

import msgspec

from backend.ids import message_id
from backend.store.db import Tx
from backend.store.records import Record

KEPT_NOTES = ("summary", "continued", "notice", "review")  # the session's notes, not an answer's
PAGE_ROWS = 1000  # rows read at a time while walking an exchange
_BACK = 50  # user rows read at a time while looking back for a prompt


class Prompt(Record, frozen=True):
    """A prompt's row: its id, the turn it opened and its text."""

    id: int
    turn_id: str | None
    content: str

    @property
    def message_id(self) -> str:
        return message_id(self.id)


class Exchange(msgspec.Struct, frozen=True):
    """A prompt and its answers: `turns` oldest first (the prompt's own turn first); `end`
    the next prompt's row id (None: the prompt is the session's last); `shown` the answer
    whose rows are active (None while no answer has a row)."""

    prompt: Prompt
    turns: list[str]
    end: int | None
    shown: str | None


def is_steer(meta: str | None) -> bool:
    """Whether a user row's meta marks a steer (it joined a running turn)."""
    if not meta:
        return False
    try:
        return bool(json.loads(meta).get("steer"))
    except (ValueError, AttributeError):
        return False


def last_prompt(tx: Tx, session_id: str, before: int | None = None) -> Prompt | None:
    """The session's last prompt (before row `before`, when given)."""
    bound = before if before is not None else 2**62
    while True:
        rows = tx.all("SELECT id, turn_id, content, meta FROM messages WHERE session_id = ? "
                      "AND role = 'user' AND id < ? ORDER BY id DESC LIMIT ?",
                      (session_id, bound, _BACK))
        for r in rows:
            if not is_steer(r["meta"]):
                return Prompt(int(r["id"]), r["turn_id"], str(r["content"]))
        if len(rows) < _BACK:
            return None
        bound = int(rows[-1]["id"])


def prompt_at(tx: Tx, session_id: str, rowid: int) -> Prompt | None:
    """The row `rowid` of the session if it is a prompt, else None."""
    r = tx.one("SELECT id, turn_id, content, role, meta FROM messages WHERE session_id = ? "
               "AND id = ?", (session_id, rowid))
    if r is None or r["role"] != "user" or is_steer(r["meta"]):
        return None
    return Prompt(int(r["id"]), r["turn_id"], str(r["content"]))


def prompt_of_turn(tx: Tx, session_id: str, turn_id: str) -> Prompt | None:
    """The prompt a turn answers: the user row it opened with, or (a turn that answered a
    prompt again) the last prompt before its first row.  None: the turn has no row here."""
    r = tx.one("SELECT min(id) FROM messages WHERE session_id = ? AND turn_id = ?",
               (session_id, turn_id))
    if r is None or r[0] is None:
        return None
    first = int(r[0])
    own = prompt_at(tx, session_id, first)
    if own is not None and own.turn_id == turn_id:
        return own
    return last_prompt(tx, session_id, before=first)


def exchange(tx: Tx, session_id: str, prompt: Prompt) -> Exchange:
    """The prompt's answers, walked from its row to the next prompt."""
    turns = [prompt.turn_id] if prompt.turn_id else []
    shown: str | None = None
    after, end = prompt.id, None
    while end is None:
        rows = tx.all("SELECT id, turn_id, role, note_kind, meta, active FROM messages "
                      "WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?",
                      (session_id, after, PAGE_ROWS))
        for r in rows:
            if r["role"] == "user" and not is_steer(r["meta"]):
                end = int(r["id"])
                break
            turn = r["turn_id"]
            if turn is None or (r["role"] == "system_note" and r["note_kind"] in KEPT_NOTES):
                continue
            if turn not in turns:
                turns.append(turn)
            if shown is None and r["active"]:
                shown = turn
        if len(rows) < PAGE_ROWS:
            break
        after = int(rows[-1]["id"])
    return Exchange(prompt, turns, end, shown)


def show(tx: Tx, session_id: str, ex: Exchange, turn_id: str) -> None:
    """Makes `turn_id` the prompt's answer the model reads: its rows in the exchange become
    active, every other answer's rows not (a turn with no row yet, a regeneration that just
    started, leaves none active).  Counts a view change."""
    end = ex.end if ex.end is not None else 2**62
    tx.execute(
        "UPDATE messages SET active = CASE WHEN turn_id = ? THEN 1 ELSE 0 END "
        "WHERE session_id = ? AND id > ? AND id < ? AND turn_id IS NOT NULL "
        "AND NOT (role = 'system_note' AND coalesce(note_kind, '') IN (?, ?, ?, ?))",
        (turn_id, session_id, ex.prompt.id, end, *KEPT_NOTES))
    tx.execute("UPDATE sessions SET view_changes = view_changes + 1 WHERE session_id = ?",
               (session_id,))
