"""Approvals: a dangerous call waits for a person (or a stored rule), and a timeout denies.

A request is a row in `approvals` plus an `approval.request` event, committed
together, so by the time any client sees the event the session reports
`waiting_approval`.  Any client with the `approve` scope answers through
`respond`; the first answer wins (the update is fenced on `pending`), and the
waiting call is woken.  `always` stores a rule for every session, `session`
one for this session; both outlive restarts.  Nobody answering within
`approvals.timeout_s` expires the request, which the call reports as denied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend import wire
from backend.config import ConfigFile
from backend.errors import ApprovalClosed, NotFound
from backend.ids import new_id, now
from backend.store import approvals
from backend.store.db import Database, Tx
from backend.store.events import StoredEvent
from backend.store.fenced import TurnFence
from backend.tools import policy
from backend.tools.base import Guard
from backend.tools.expiry import announce
from shared.config import ApprovalMode
from shared.protocol import (
    EVENT_NAMES,
    Approval,
    ApprovalRequested,
    ApprovalResolved,
    ApprovalStatus,
    Decision,
)

log = logging.getLogger("tools")
# The stored event `observe` wakes on, as the store names it (its rows carry the name).
RESOLVED = EVENT_NAMES[ApprovalResolved]


class Approvals:
    def __init__(self, db: Database, config: ConfigFile, epoch: int) -> None:
        self.db = db
        self.config = config
        self.epoch = epoch
        self._waiting: dict[str, asyncio.Future[Decision]] = {}

    async def allowing_rule(
        self, session_id: str, tool: str, args: dict[str, Any], cwd: Path, mode: ApprovalMode,
        key: str,
    ) -> str | None:
        """The pattern of a stored rule that covers the call, or None; `key` is its guard's
        rule key (for a file tool, the folder its path was resolved to: the rule judges that
        same resolution)."""
        patterns = await self.db.read(lambda tx: approvals.rules_for(tx, tool, session_id))
        return next((pattern for pattern in patterns
                     if policy.rule_allows(tool, pattern, tool, args, cwd, mode=mode, key=key)),
                    None)

    async def ask(
        self, *, fence: TurnFence, turn_id: str, call_id: str, tool: str, summary: str, guard: Guard,
    ) -> Approval | None:
        """Waits for a person's decision and returns the closed approval: its `decision`, or
        None when it expired (`decided_by` says by the clock or cut short); None when its row
        went with its session.  A cancelled wait expires it and re-raises.  The request and its
        closing are the turn's writes, fenced on its lease."""
        session_id = fence.session_id
        approval_id = new_id("apr")
        timeout = self.config.config.approvals.timeout_s
        expires = (datetime.now(UTC) + timedelta(seconds=timeout)).isoformat()
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[approval_id] = future

        def job(tx: Tx) -> None:
            approval = approvals.insert(
                tx, approval_id=approval_id, session_id=session_id, turn_id=turn_id,
                call_id=call_id, tool=tool, summary=summary, reason=guard.reason,
                rule_key=guard.rule_key, epoch=self.epoch, expires_at=expires,
            )
            announce(tx, ApprovalRequested, approval)

        try:
            await fence.write(job)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), timeout)
            # Answered, or the time ran out; a person may have answered just as it did: the
            # stored row decides.
            return await self._close(fence, approval_id)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._close(fence, approval_id))
            raise
        finally:
            self._waiting.pop(approval_id, None)

    async def respond(self, approval_id: str, decision: Decision) -> Approval:
        """A person's answer; raises ApprovalClosed when it was already decided or expired."""
        status: ApprovalStatus = "denied" if decision == "deny" else "allowed"

        def job(tx: Tx) -> Approval:
            row = approvals.row(tx, approval_id)
            if row is None:
                raise NotFound("approval", approval_id)
            if not approvals.decide(tx, approval_id, status, decision):
                raise ApprovalClosed(
                    f"approval {approval_id} is already {row.status}; nothing to answer"
                )
            if decision in ("always", "session"):
                scope = None if decision == "always" else row.session_id
                approvals.add_rule(tx, row.tool, row.rule_key, scope)
            decided = approvals.row(tx, approval_id)
            assert decided is not None
            return announce(tx, ApprovalResolved, decided)

        approval = await self.db.write(job)
        future = self._waiting.get(approval_id)
        if future is not None and not future.done():
            future.set_result(decision)
        log.info("approval %s: %s", approval_id, decision)
        return approval

    def observe(self, item: Any) -> None:
        """Wakes the wait of an approval answered through another backend on the same
        database (its `approval.resolved` came from the store); the stored row decides."""
        if not isinstance(item, StoredEvent) or item.event.type != RESOLVED:
            return
        approval = item.event.data.get("approval")
        if not isinstance(approval, dict):
            return
        future = self._waiting.get(approval.get("approval_id", ""))
        if future is not None and not future.done():
            future.set_result(approval.get("decision") or "deny")

    async def _close(self, fence: TurnFence, approval_id: str) -> Approval | None:
        """Expires the request unless it was answered; returns it as it stands (None when it
        was deleted with its session)."""
        def job(tx: Tx) -> Approval | None:
            expired = approvals.decide(tx, approval_id, "expired", None)
            r = approvals.row(tx, approval_id)
            if r is None:
                return None
            return announce(tx, ApprovalResolved, r) if expired else wire.approval(r)

        return await fence.write(job)


# --- who decided, for the tool result's meta -----------------------------------------------


def decided_meta(approval: Approval) -> dict[str, Any]:
    """What a tool result's meta says of the request that decided its call: `decided_by`
    ("user", "timeout" or "stopped"), `decided_at`, `approval_id`, the person's `decision`
    when there was one, `waited_ms`, and `timeout_s` when nobody answered in time."""
    meta: dict[str, Any] = {"decided_by": approval.decided_by or "timeout",
                            "approval_id": approval.approval_id}
    if approval.decided_at:
        meta["decided_at"] = approval.decided_at
        meta["waited_ms"] = max(0, round((_when(approval.decided_at)
                                           - _when(approval.created_at)).total_seconds() * 1000))
    if approval.decision is not None:
        meta["decision"] = approval.decision
    if meta["decided_by"] == "timeout":
        meta["timeout_s"] = round((_when(approval.expires_at)
                                   - _when(approval.created_at)).total_seconds(), 1)
    return meta


def unasked_meta(decided_by: str, rule: str | None = None) -> dict[str, Any]:
    """The meta of a call decided without asking: "rule" (a stored rule allowed it; `rule`
    is its pattern) or "policy" (a built-in guard refuses it in every mode)."""
    meta: dict[str, Any] = {"decided_by": decided_by, "decided_at": now()}
    if rule is not None:
        meta["rule"] = rule
    return meta


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
