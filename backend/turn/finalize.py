"""Closing a turn in one transaction: transcript tail, receipt, usage, and the last events.

Everything a finished turn leaves behind commits together, so after a crash
either all of it is there or none of it is (and recovery marks the admission
`unknown`).  `message.complete` is appended after the rows it describes, and
`admission.settled` last.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.store import admissions, events, messages, sessions
from backend.store.db import Tx
from shared.protocol import AdmissionEvent, MessageComplete, TurnStatus, Usage, UsageUpdate


@dataclass
class TurnOutcome:
    session_id: str
    admission_id: str
    turn_id: str
    status: TurnStatus
    text: str
    usage: Usage
    failure_reason: str | None = None


def close_turn(tx: Tx, out: TurnOutcome) -> None:
    sid, tid, aid = out.session_id, out.turn_id, out.admission_id
    # Delivered text always gets an assistant row: what people saw is in the ledger.
    if out.text:
        status = None if out.status == "completed" else out.status
        messages.insert(tx, sid, "assistant", out.text, turn_id=tid, status=status)
    # A failed or interrupted turn gets a closing note, so the next turn does not
    # read as a continuation of it.
    if out.status == "failed":
        messages.insert(
            tx, sid, "system_note", f"The turn failed: {out.failure_reason}",
            turn_id=tid, note_kind="failed",
        )
    elif out.status == "interrupted":
        messages.insert(
            tx, sid, "system_note", out.failure_reason or "Interrupted.",
            turn_id=tid, note_kind="interrupted",
        )
    admissions.settle(
        tx, aid, out.status, final_text=out.text,
        failure_reason=out.failure_reason if out.status != "completed" else None,
    )
    sessions.add_usage(tx, sid, out.usage)
    sessions.touch(tx, sid)
    row = sessions.row(tx, sid)
    assert row is not None
    totals = sessions.usage_of(row)
    events.append(tx, sid, "usage.update", UsageUpdate(usage=totals),
                  turn_id=tid, admission_id=aid)
    complete = MessageComplete(
        admission_id=aid, turn_id=tid, text=out.text, status=out.status, usage=out.usage,
        failure_reason=out.failure_reason if out.status != "completed" else None,
    )
    events.append(tx, sid, "message.complete", complete, turn_id=tid, admission_id=aid)
    settle_event(tx, aid)


def settle_event(tx: Tx, admission_id: str) -> None:
    """Appends `admission.settled` with the admission's receipt as it now stands."""
    row = admissions.by_id(tx, admission_id)
    assert row is not None
    receipt = admissions.receipt(tx, row)
    events.append(
        tx, row["session_id"], "admission.settled", AdmissionEvent(receipt=receipt),
        turn_id=row["turn_id"], admission_id=admission_id,
    )

