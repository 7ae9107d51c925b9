"""The approvals and approval_rules tables: what waits for a person, and what was allowed for good."""

from __future__ import annotations

from datetime import datetime, timedelta

from backend.ids import new_id, now
from backend.store import sessions
from backend.store.db import Row, Tx
from backend.store.records import Record, record
from shared.literals import ApprovalStatus, DecidedBy, Decision

# An expiry this close to `expires_at` (or after it) was the clock's: the stored times are
# taken a moment apart (expires_at before the request is written, decided_at after the wait).
CLOCK_SLACK = timedelta(seconds=0.5)


class ApprovalRecord(Record, frozen=True):
    """An approvals row, with who closed it (`decided_by`, read from its times), and what
    only the backend keeps: `rule_key`, what an `always`/`session` answer allows from then
    on; the `epoch` of the process whose turn asked."""

    approval_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    summary: str
    reason: str
    status: ApprovalStatus
    created_at: str
    expires_at: str
    decision: Decision | None
    decided_at: str | None
    decided_by: DecidedBy | None
    rule_key: str
    epoch: int

    @classmethod
    def from_row(cls, row: Row) -> ApprovalRecord:
        by = decided_by(row["status"], row["decided_at"], row["expires_at"])
        return record(cls, row, decided_by=by)


class RuleRecord(Record, frozen=True):
    """An approval_rules row of every session's (a global allow rule)."""

    rule_id: str
    tool: str
    pattern: str
    created_at: str


def decided_by(status: ApprovalStatus, decided_at: str | None, expires_at: str) -> DecidedBy | None:
    """Who closed an approval, read from its row: only a person's answer allows or denies;
    an expiry at its time is the timeout's, one before it was cut short (`stopped`: its turn
    was interrupted, or a restart expired it)."""
    if status == "pending":
        return None
    if status in ("allowed", "denied"):
        return "user"
    try:
        cut_short = decided_at is not None and _when(decided_at) < _when(expires_at) - CLOCK_SLACK
    except ValueError:  # not a time: nothing says it was cut short
        cut_short = False
    return "stopped" if cut_short else "timeout"


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def insert(
    tx: Tx, *, approval_id: str, session_id: str, turn_id: str, call_id: str, tool: str,
    summary: str, reason: str, rule_key: str, epoch: int, expires_at: str,
) -> ApprovalRecord:
    tx.execute(
        "INSERT INTO approvals (approval_id, session_id, turn_id, call_id, tool, summary, reason, "
        "rule_key, status, epoch, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
        (approval_id, session_id, turn_id, call_id, tool, summary, reason, rule_key, epoch, now(),
         expires_at),
    )
    sessions.changed(tx, session_id)  # now waiting_approval
    found = row(tx, approval_id)
    assert found is not None
    return found


def row(tx: Tx, approval_id: str) -> ApprovalRecord | None:
    r = tx.one("SELECT * FROM approvals WHERE approval_id = ?", (approval_id,))
    return ApprovalRecord.from_row(r) if r is not None else None


def decide(
    tx: Tx, approval_id: str, status: ApprovalStatus, decision: Decision | None
) -> bool:
    """Moves a pending approval to its final status; False when it was no longer pending."""
    cur = tx.execute(
        "UPDATE approvals SET status = ?, decision = ?, decided_at = ? "
        "WHERE approval_id = ? AND status = 'pending'",
        (status, decision, now(), approval_id),
    )
    if cur.rowcount != 1:
        return False
    r = row(tx, approval_id)
    assert r is not None
    sessions.changed(tx, r.session_id)  # no longer waiting_approval (if none else pends)
    return True


def pending(tx: Tx, session_id: str | None = None) -> list[ApprovalRecord]:
    if session_id is None:
        rows = tx.all("SELECT * FROM approvals WHERE status = 'pending' ORDER BY created_at")
    else:
        rows = tx.all(
            "SELECT * FROM approvals WHERE status = 'pending' AND session_id = ? ORDER BY created_at",
            (session_id,),
        )
    return [ApprovalRecord.from_row(r) for r in rows]


def pending_of_others(tx: Tx, epoch: int) -> list[ApprovalRecord]:
    """Pending approvals asked by another process than this epoch's."""
    return [ApprovalRecord.from_row(r) for r in
            tx.all("SELECT * FROM approvals WHERE status = 'pending' AND epoch <> ?", (epoch,))]


def stale_pending(tx: Tx, epoch: int) -> list[ApprovalRecord]:
    """Pending approvals of turns run by an earlier process: nobody waits for them now."""
    return [ApprovalRecord.from_row(r) for r in
            tx.all("SELECT * FROM approvals WHERE status = 'pending' AND epoch < ?", (epoch,))]





# --- rules -----------------------------------------------------------------------------


def add_rule(tx: Tx, tool: str, pattern: str, session_id: str | None) -> str:
    """Stores an allow rule (session_id None: for every session); returns its id."""
    existing = tx.one(
        "SELECT rule_id FROM approval_rules WHERE tool = ? AND pattern = ? "
        "AND session_id IS NOT DISTINCT FROM ?",
        (tool, pattern, session_id),
    )
    if existing is not None:
        return str(existing["rule_id"])
    rule_id = new_id("rule")
    tx.execute(
        "INSERT INTO approval_rules (rule_id, session_id, tool, pattern, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (rule_id, session_id, tool, pattern, now()),
    )
    return rule_id


def rules_for(tx: Tx, tool: str, session_id: str) -> list[str]:
    """Patterns that may allow `tool` in this session: global rules and the session's own."""
    return [
        r["pattern"] for r in tx.all(
            "SELECT pattern FROM approval_rules WHERE tool = ? "
            "AND (session_id IS NULL OR session_id = ?)",
            (tool, session_id),
        )
    ]


def global_rules(tx: Tx) -> list[RuleRecord]:
    return RuleRecord.from_rows(tx.all(
        "SELECT rule_id, tool, pattern, created_at FROM approval_rules WHERE session_id IS NULL "
        "ORDER BY created_at, rule_id"
    ))


def delete_rule(tx: Tx, rule_id: str) -> bool:
    return tx.execute("DELETE FROM approval_rules WHERE rule_id = ?", (rule_id,)).rowcount == 1
