"""The session authority: durable admission, the per-session FIFO drainer, and turn control.

Input enters only through `submit`, which commits a `queued` row before it
answers.  One drainer task per session claims the oldest queued row — but
never while a row of that session is `started` or `unknown` — and runs it;
sessions drain in parallel, each one turn at a time.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, replace

from backend.authority.payload import Payload, normalize
from backend.errors import AdmissionConflict, AdmissionState, NotFound
from backend.ids import new_id
from backend.store import admissions, compression, events, messages, sessions
from backend.store.db import Database, Tx
from backend.turn.finalize import TurnOutcome, close_turn, settle_event
from backend.turn.lease import holder_for, try_take
from backend.turn.runner import Claim, Interrupt, TurnRunner
from shared import logs
from shared.protocol import AdmissionEvent, PromptSubmitParams, Receipt, TurnStarted, Usage

log = logging.getLogger("authority")


@dataclass
class ActiveTurn:
    claim: Claim
    interrupt: Interrupt


class SessionAuthority:
    def __init__(self, db: Database, runner: TurnRunner, epoch: int) -> None:
        self.db = db
        self.runner = runner
        self.epoch = epoch
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._active: dict[str, ActiveTurn] = {}
        self._accepting = True
        self._retired: set[str] = set()

    # --- input ----------------------------------------------------------------

    async def submit(self, principal: str, params: PromptSubmitParams) -> Receipt:
        """Admits input durably; the same (principal, session, request_id) runs once."""
        payload = normalize(params)

        def job(tx: Tx) -> Receipt:
            # A conversation that compression rotated continues in its newest session; the
            # request id is looked up where it was sent and where it would run.
            sent_to = params.session_id
            params.session_id = compression.leaf(tx, sent_to)
            existing = admissions.by_key(tx, principal, sent_to, params.request_id) \
                or admissions.by_key(tx, principal, params.session_id, params.request_id)
            if existing is not None:
                if existing["payload_digest"] != payload.digest:
                    raise AdmissionConflict(
                        f"request_id {params.request_id!r} was already used with different "
                        "input in this session; use a new request_id for new input"
                    )
                return admissions.receipt(tx, existing, duplicate=True)
            if not sessions.exists(tx, params.session_id):
                raise NotFound("session", params.session_id)
            # The person moving on acknowledges a turn whose outcome is unknown.
            for row in tx.all(
                "SELECT admission_id FROM admissions WHERE session_id = ? AND status = 'unknown'",
                (params.session_id,),
            ):
                _resolve_unknown(tx, row["admission_id"])
            admission_id = new_id("adm")
            admissions.insert(
                tx, admission_id, principal, params.session_id, params.request_id,
                payload.to_json(), payload.digest,
            )
            receipt = _receipt(tx, admission_id)
            events.append(
                tx, params.session_id, "admission.queued",
                AdmissionEvent(receipt=receipt), admission_id=admission_id,
            )
            return receipt

        receipt = await self.db.write(job)
        params.session_id = receipt.session_id
        if not receipt.duplicate:
            if params.intent == "interrupt":
                self.interrupt(params.session_id, "Interrupted by a newer prompt.")
            self.wake(params.session_id)
        return receipt

    async def cancel(self, admission_id: str) -> Receipt:
        def job(tx: Tx) -> Receipt:
            row = _existing(tx, admission_id)
            if row["status"] != "queued":
                raise AdmissionState(
                    f"admission is {row['status']}; only a queued one can be cancelled"
                )
            admissions.settle(tx, admission_id, "cancelled")
            settle_event(tx, admission_id)
            return _receipt(tx, admission_id)

        return await self.db.write(job)

    async def resolve(self, admission_id: str) -> Receipt:
        def job(tx: Tx) -> Receipt:
            row = _existing(tx, admission_id)
            if row["status"] != "unknown":
                raise AdmissionState(
                    f"admission is {row['status']}; only an unknown one can be resolved"
                )
            _resolve_unknown(tx, admission_id)
            return _receipt(tx, admission_id)

        receipt = await self.db.write(job)
        self.wake(receipt.session_id)
        return receipt

    # --- turns ----------------------------------------------------------------

    def interrupt(self, session_id: str, reason: str = "Interrupted by the user.") -> bool:
        active = self._find(session_id)
        if active is None:
            return False
        active.interrupt.set(reason)
        return True

    def running(self, session_id: str) -> Claim | None:
        active = self._find(session_id)
        if active is None:
            return None
        moved = active.interrupt.session_id
        return replace(active.claim, session_id=moved) if moved else active.claim

    def _find(self, session_id: str) -> ActiveTurn | None:
        """The turn running in a session: started there, or moved there by rotation."""
        for started, active in self._active.items():
            now_in = active.interrupt.session_id or started
            if now_in == session_id:
                return active
        return None

    def wake(self, session_id: str) -> None:
        """Makes sure a drainer will look at this session's queue."""
        if not self._accepting or session_id in self._retired:
            return
        self._dirty.add(session_id)
        task = self._drainers.get(session_id)
        if task is None or task.done():
            self._drainers[session_id] = asyncio.create_task(
                self._drain(session_id), name=f"drain-{session_id}"
            )

    async def _drain(self, session_id: str) -> None:
        try:
            while self._accepting and session_id not in self._retired:
                self._dirty.discard(session_id)
                claim = await self.db.write(lambda tx: self._claim(tx, session_id))
                if claim is None:
                    if session_id in self._dirty:
                        continue
                    return
                active = ActiveTurn(claim, Interrupt())
                self._active[session_id] = active
                try:
                    await self.runner.run(claim, active.interrupt)
                except Exception:
                    error_id = logs.internal(log, "turn %s crashed", claim.turn_id)
                    await self._settle_crashed(claim, error_id)
                finally:
                    self._active.pop(session_id, None)
                    moved = active.interrupt.session_id
                    if moved and moved != session_id:
                        self.wake(moved)  # its queue moved with it
        except Exception:
            logs.internal(log, "drainer of session %s stopped", session_id)
        finally:
            if self._drainers.get(session_id) is asyncio.current_task():
                del self._drainers[session_id]

    def _claim(self, tx: Tx, session_id: str) -> Claim | None:
        """Takes the oldest queued row unless the session's queue is held; starts its turn."""
        if admissions.blocking(tx, session_id) is not None:
            return None
        row = admissions.oldest_queued(tx, session_id)
        if row is None:
            return None
        session = sessions.row(tx, session_id)
        assert session is not None
        turn_id = new_id("turn")
        admission_id = row["admission_id"]
        admissions.mark_started(tx, admission_id, self.epoch, turn_id)
        text = Payload.from_json(row["payload_json"]).text
        holder = holder_for(self.epoch, turn_id)
        # The lease, when free, is taken in the claim's own transaction (the common case
        # costs nothing extra); otherwise the runner waits for it before writing the
        # user's row, since the transcript belongs to the lease holder.
        leased = try_take(tx, session_id, holder, self.runner.config.config.lease.ttl_s) is None
        if leased:
            messages.insert(tx, session_id, "user", text, turn_id=turn_id)
        sessions.touch(tx, session_id)
        model = session["model"] or self.runner.default_model()
        events.append(
            tx, session_id, "turn.started",
            TurnStarted(turn_id=turn_id, admission_id=admission_id, model=model),
            turn_id=turn_id, admission_id=admission_id,
        )
        return Claim(session_id, admission_id, turn_id, text, session["cwd"], holder, leased)

    async def _settle_crashed(self, claim: Claim, error_id: str) -> None:
        """A bug escaped the runner: settle the admission so the queue is not held forever."""
        outcome = TurnOutcome(
            claim.session_id, claim.admission_id, claim.turn_id, "failed", "", Usage(),
            f"an internal error ended this turn; the backend log (DIR/logs/backend.log) has "
            f"details under error_id {error_id}", holder=claim.holder,
        )
        try:
            await self.db.write(lambda tx: close_turn(tx, outcome))
        except Exception:
            logs.internal(log, "could not settle crashed turn %s", claim.turn_id)

    async def retire(self, session_id: str) -> None:
        """Stops the session's drainer for good (before deletion), interrupting its turn."""
        self._retired.add(session_id)
        self.interrupt(session_id, "Interrupted: the session was deleted.")
        task = self._drainers.get(session_id)
        if task is not None and not task.done():
            await task

    # --- lifecycle --------------------------------------------------------------

    def start(self, session_ids: list[str]) -> None:
        for sid in session_ids:
            self.wake(sid)

    def busy(self) -> bool:
        return bool(self._active)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Starts nothing new; lets running turns finish within the grace, then interrupts them."""
        self._accepting = False
        tasks = [t for t in self._drainers.values() if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_s * 0.7)
        if pending:
            for active in list(self._active.values()):
                active.interrupt.set("Interrupted: the backend was shut down.")
            await asyncio.wait(pending, timeout=grace_s * 0.3)


def _existing(tx: Tx, admission_id: str) -> sqlite3.Row:
    row = admissions.by_id(tx, admission_id)
    if row is None:
        raise NotFound("admission", admission_id)
    return row


def _receipt(tx: Tx, admission_id: str) -> Receipt:
    row = admissions.by_id(tx, admission_id)
    assert row is not None
    return admissions.receipt(tx, row)


def _resolve_unknown(tx: Tx, admission_id: str) -> None:
    admissions.settle(
        tx, admission_id, "interrupted",
        failure_reason="the backend stopped while this turn ran; its outcome is unknown",
    )
    settle_event(tx, admission_id)
