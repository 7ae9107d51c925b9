"""Closing a turn in one transaction: transcript tail, receipt, usage, lease, and the last events.

Everything a finished turn leaves behind commits together, so after a crash
either all of it is there or none of it is (and recovery marks the admission
`unknown`); that includes the answer's last `message.delta` events when the
stream handed them over unstored (`TurnEnd.unsent`): no client saw them before.
The tail is closed first: every tool call of the turn gets exactly one result,
delivered text gets an assistant row, and a failed or interrupted turn gets a
closing note so the next turn does not read as its continuation.
`message.complete` follows the rows it describes, and `admission.settled` comes last.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from backend import wire
from backend.errors import LeaseLost
from backend.store import admissions, events, leases, messages, sessions, usage
from backend.store.admissions import AdmissionRecord
from backend.store.db import Tx
from backend.store.leases import Holder
from backend.turn.stream import pieces
from shared.protocol import (
    AdmissionSettled,
    MessageComplete,
    TextDelta,
    ToolComplete,
    ToolStatus,
    TurnStatus,
    Usage,
    UsageUpdate,
)

log = logging.getLogger("turn")

# A turn's end is worth waiting a little for (a lock held, a disk just freed); after these
# the caller settles the turn `unknown` in place instead (authority/queue.py).
CLOSE_RETRY_S = (0.25, 0.5, 1.0, 2.0)

UNRECORDED_RESULT = (
    "The result of this call was not recorded (the turn ended before it could be saved), "
    "so its outcome is not known. Check before assuming it did or did not happen."
)


@dataclass(frozen=True)
class LedgerEntry:
    """One model call's usage, for the cost ledger."""

    provider: str
    model: str
    usage: Usage
    task: str = "turn"


def record_ledger(tx: Tx, session_id: str, entries: list[LedgerEntry]) -> None:
    for e in entries:
        usage.record(tx, session_id, e.provider, e.model, e.task, e.usage)


@dataclass
class TurnEnd:
    session_id: str
    admission_id: str
    turn_id: str
    status: TurnStatus
    text: str
    usage: Usage
    failure_reason: str | None = None
    holder: Holder | None = None  # the lease to release, when the turn held one
    transcript: bool = True  # False: the turn never held the lease, so it writes no rows
    text_stored: bool = False  # True: `text` is already in an assistant row (with tool calls)
    ledger: list[LedgerEntry] = field(default_factory=list)  # calls not yet in the ledger
    failure_detail: str | None = None  # a provider failure's raw detail (beside the words)
    failure_kind: str | None = None  # a provider failure's kind
    # The answer's last streamed text, not stored yet (DeltaWriter.close(hand_over=True)):
    # its message.delta events go in this commit, ahead of everything else of the close.
    unsent: str = ""


def close_turn(tx: Tx, out: TurnEnd) -> None:
    """Writes the turn's end, all of it or nothing: a turn whose admission is no longer its
    own `started` one (another process took it over and settled it) raises LeaseLost.  The
    caller runs it through the turn's fence (store/fenced.py) when the turn holds a lease."""
    sid, tid, aid = out.session_id, out.turn_id, out.admission_id
    own = admissions.by_id(tx, aid)
    if own is None or own.status != "started" or own.turn_id != tid:
        raise LeaseLost(f"admission {aid} is no longer this turn's to settle (another process "
                        "took the turn over); nothing of its end is written")
    for piece in pieces(out.unsent):
        wire.emit(tx, sid, TextDelta(text=piece), turn_id=tid, admission_id=aid)
    if out.transcript:
        close_tail(tx, sid, tid, "unknown", UNRECORDED_RESULT, aid)
        # Delivered text always gets an assistant row: what people saw is in the ledger.
        if out.text and not out.text_stored:
            status = None if out.status == "completed" else out.status
            messages.insert(tx, sid, "assistant", out.text, turn_id=tid, status=status)
        # A failed or interrupted turn gets a closing note, so the next turn does not
        # read as a continuation of it.  Its text is the reason alone (front-ends label the
        # note by its kind); a provider's raw detail goes to meta, shown a click away.
        if out.status == "failed":
            meta = {k: v for k, v in (("kind", out.failure_kind), ("detail", out.failure_detail))
                    if v}
            messages.insert(
                tx, sid, "system_note", out.failure_reason or "The turn failed.",
                turn_id=tid, note_kind="failed", meta=meta or None,
            )
        elif out.status == "interrupted":
            messages.insert(
                tx, sid, "system_note", out.failure_reason or "Interrupted.",
                turn_id=tid, note_kind="interrupted",
            )
    # The turn's own admission, then the steers that joined it: they end as it ended.
    for settled in (aid, *admissions.joined(tx, sid, tid, aid)):
        admissions.settle(
            tx, settled, out.status, final_text=out.text,
            failure_reason=out.failure_reason if out.status != "completed" else None,
        )
        if settled != aid:
            settle_event(tx, settled)
    record_ledger(tx, sid, out.ledger)
    sessions.touch(tx, sid)
    if out.holder is not None:
        leases.release(tx, sid, out.holder)
    row = sessions.row(tx, sid)
    assert row is not None
    totals = wire.usage(row)
    wire.emit(tx, sid, UsageUpdate(usage=totals), turn_id=tid, admission_id=aid)
    complete = MessageComplete(
        admission_id=aid, turn_id=tid, text=out.text, status=out.status, usage=out.usage,
        failure_reason=out.failure_reason if out.status != "completed" else None,
        failure_detail=out.failure_detail if out.status == "failed" else None,
    )
    wire.emit(tx, sid, complete, turn_id=tid, admission_id=aid)
    settle_event(tx, aid)


def close_tail(
    tx: Tx, session_id: str, turn_id: str, status: ToolStatus, content: str,
    admission_id: str | None = None,
) -> int:
    """Gives every call of the turn that has no result one with `status`; returns how many."""
    open_calls = messages.open_calls(tx, session_id, turn_id)
    for call in open_calls:
        messages.insert(tx, session_id, "tool", content, turn_id=turn_id, status=status,
                        call_id=call["call_id"], tool_name=call["name"])
        wire.emit(tx, session_id, ToolComplete(
            call_id=call["call_id"], name=call["name"], status=status,
            summary=call["name"], duration_ms=0,
        ), turn_id=turn_id, admission_id=admission_id)
    return len(open_calls)


def settle_event(tx: Tx, admission_id: str) -> None:
    """Appends `admission.settled` with the admission's receipt as it now stands."""
    row = admissions.by_id(tx, admission_id)
    assert row is not None
    receipt = wire.receipt(admissions.receipt(tx, row))
    wire.emit(
        tx, row.session_id, AdmissionSettled(receipt=receipt),
        turn_id=row.turn_id, admission_id=admission_id,
    )


def mark_lost(tx: Tx, row: AdmissionRecord, note: str, result: str) -> None:
    """Marks a `started` admission `unknown` and closes its turn's transcript as far as it
    is known: open calls get `result` (status unknown), delivered text stays, `note` ends it.
    A background review's (turn/review.py) is settled `interrupted` instead, quietly: it wrote
    no transcript rows, each of its writes was whole, and it must not hold the queue."""
    sid, turn_id = row.session_id, row.turn_id
    if row.principal == admissions.REVIEW:
        admissions.settle(tx, row.admission_id, "interrupted",
                          failure_reason="the backend stopped while the review ran")
        return
    admissions.mark_unknown(tx, row.admission_id)
    if turn_id:
        closed = close_tail(tx, sid, turn_id, "unknown", result, row.admission_id)
        # Text that reached clients is a delivered fact: keep it in the transcript, marked,
        # rather than lose it.  (Only stored deltas were ever published.)
        streamed = events.turn_text(tx, sid, turn_id)
        if streamed:
            messages.insert(tx, sid, "assistant", streamed, turn_id=turn_id, status="unknown")
        if closed:
            log.warning("turn %s: %d tool calls have an unknown outcome", turn_id, closed)
    messages.insert(tx, sid, "system_note", note, turn_id=turn_id, note_kind="recovered")
