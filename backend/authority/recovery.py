"""Start-up recovery: settle what an earlier process left behind, before the READY line.

Runs in one transaction after the epoch was bumped.  A `started` admission of
an older epoch may or may not have had effects, so it becomes `unknown` and
is never re-run; it holds its session's queue until someone resolves it.
"""

from __future__ import annotations

import logging

from backend.store import admissions, events, messages
from backend.store.db import Tx

log = logging.getLogger("authority")

RECOVERED_NOTE = (
    "The backend stopped while this turn was running, so its outcome is unknown. "
    "It will not be re-run; send a new message to continue."
)


def recover(tx: Tx, epoch: int) -> list[str]:
    """Marks orphaned turns unknown; returns the sessions whose queues should drain."""
    for row in admissions.orphan_started(tx, epoch):
        sid, turn_id = row["session_id"], row["turn_id"]
        admissions.mark_unknown(tx, row["admission_id"])
        # Text that reached clients before the crash is a delivered fact: keep it in the
        # transcript, marked, rather than lose it.
        streamed = events.turn_text(tx, sid, turn_id) if turn_id else ""
        if streamed:
            messages.insert(tx, sid, "assistant", streamed, turn_id=turn_id, status="unknown")
        messages.insert(tx, sid, "system_note", RECOVERED_NOTE, turn_id=turn_id,
                        note_kind="recovered")
        log.warning("admission %s of session %s is unknown after a restart",
                    row["admission_id"], sid)
    return admissions.sessions_with_queued(tx)
