"""Pending approvals announced and expired: what start-up recovery needs of approvals
(`authority/recovery.py`), kept apart from `approvals.py` so that the backend's path to READY
does not load the tool policy behind it."""

from __future__ import annotations

from backend import wire
from backend.store import approvals
from backend.store.approvals import ApprovalRecord
from backend.store.db import Tx
from shared.protocol import Approval, ApprovalRequested, ApprovalResolved


def expire_stale(tx: Tx, epoch: int, keep: set[str]) -> int:
    """Start-up recovery: pending approvals of an earlier process's turns expire, except in
    the sessions in `keep` (a live process still holds their lease and waits on them)."""
    rows = [r for r in approvals.stale_pending(tx, epoch) if r.session_id not in keep]
    for r in rows:
        expire_one(tx, r)
    return len(rows)


def expire_one(tx: Tx, pending: ApprovalRecord) -> None:
    """Expires a pending approval nobody waits for any more, and says so."""
    if approvals.decide(tx, pending.approval_id, "expired", None):
        approval = approvals.row(tx, pending.approval_id)
        assert approval is not None
        announce(tx, ApprovalResolved, approval)


def announce(tx: Tx, kind: type[ApprovalRequested | ApprovalResolved], row: ApprovalRecord) -> Approval:
    """Told to the session's subscribers and to every reader (`wire.emit_to_all`).  Returns
    the approval as sent."""
    approval = wire.approval(row)
    wire.emit_to_all(tx, approval.session_id, kind(approval=approval), approval.turn_id)
    return approval
