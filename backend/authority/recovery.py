"""Start-up recovery: settle what an earlier process left behind, before the READY line.

Runs in one transaction after the epoch was bumped.  A `started` admission of
an older epoch may or may not have had effects, so it becomes `unknown` and
is never re-run; it holds its session's queue until someone resolves it.
Its tool calls that have no result get one with status `unknown` — never a
made-up success — so the next turn's model sees that the outcome is not
known.  Leases of dead holders are dropped and approvals nobody waits for
any more expire.  A turn whose lease a live process still holds (two
backends on one folder) is left alone: that process is still running it.
"""

from __future__ import annotations

import logging
import time

from backend.store import admissions, events, leases, messages
from backend.store.db import Tx
from backend.tools.approvals import expire_stale
from backend.turn.finalize import close_tail
from backend.turn.lease import provably_dead

log = logging.getLogger("authority")

RECOVERED_NOTE = (
    "The backend stopped while this turn was running, so its outcome is unknown. "
    "It will not be re-run; send a new message to continue."
)
UNKNOWN_RESULT = (
    "The backend stopped while this call was running, so its outcome is not known: it may "
    "have run completely, partly or not at all. Check the current state before relying on it "
    "or running it again."
)


def recover(tx: Tx, epoch: int) -> list[str]:
    """Marks orphaned turns unknown; returns the sessions whose queues should drain."""
    live = _drop_dead_leases(tx, epoch)
    for row in admissions.orphan_started(tx, epoch):
        sid, turn_id = row["session_id"], row["turn_id"]
        if live.get(sid) == turn_id:
            continue  # its own process still runs it, holding the lease
        admissions.mark_unknown(tx, row["admission_id"])
        if turn_id:
            closed = close_tail(tx, sid, turn_id, "unknown", UNKNOWN_RESULT, row["admission_id"])
            # Text that reached clients before the crash is a delivered fact: keep it in
            # the transcript, marked, rather than lose it.
            streamed = events.turn_text(tx, sid, turn_id)
            if streamed:
                messages.insert(tx, sid, "assistant", streamed, turn_id=turn_id, status="unknown")
            if closed:
                log.warning("turn %s: %d tool calls have an unknown outcome", turn_id, closed)
        messages.insert(tx, sid, "system_note", RECOVERED_NOTE, turn_id=turn_id,
                        note_kind="recovered")
        log.warning("admission %s of session %s is unknown after a restart",
                    row["admission_id"], sid)
    expired = expire_stale(tx, epoch, keep=set(live))
    if expired:
        log.warning("%d pending approvals of earlier turns expired", expired)
    return admissions.sessions_with_queued(tx)


def _drop_dead_leases(tx: Tx, epoch: int) -> dict[str, str]:
    """Drops leases whose holder is dead or expired; returns {session: turn} of the leases
    a live process (or one whose liveness cannot be judged) still holds."""
    live: dict[str, str] = {}
    now = time.time()
    for row in leases.all_rows(tx):
        if row["expires_at"] <= now or provably_dead(row) or row["epoch"] >= epoch:
            leases.drop(tx, row["session_id"], row["holder"])
        else:
            live[row["session_id"]] = row["turn_id"]
    return live
