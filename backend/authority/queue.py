"""The session authority: durable admission, the per-session FIFO drainer, and turn control.

Input enters only through `submit`, which commits a `queued` row before it
answers.  One drainer task per session claims the oldest queued row — but
never while a row of that session is `started` or `unknown` — and runs it;
sessions drain in parallel, each one turn at a time.

A store that cannot write (a full disk) wedges nothing: a drainer waits it
out, and a turn whose end could not be saved is settled `unknown` in place —
the state a restart would give it — as soon as the store takes writes again.
The next prompt (or `admission.resolve`) then moves the queue on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass

from backend import wire
from backend.authority.payload import Payload, normalize
from backend.authority.recovery import DELEGATE_PRINCIPAL, settle_lost
from backend.errors import (
    AdmissionConflict,
    AdmissionState,
    InvalidParams,
    LeaseLost,
    NotFound,
    StoreUnavailable,
)
from backend.ids import message_id, message_rowid, new_id
from backend.store import admissions, answers, compression, peers, sessions
from backend.store import attachments as files
from backend.store.admissions import AdmissionRecord
from backend.store.db import Database, Tx
from backend.store.leases import Holder
from backend.turn.finalize import CLOSE_RETRY_S, TurnEnd, close_turn, settle_event
from backend.turn.lease import try_take
from backend.turn.route import (
    DEFAULT_REASON,
    NEWER_PROMPT,
    SESSION_DELETED,
    SHUTDOWN,
    Claim,
    Routes,
    RunningTurn,
    take_session,
)
from backend.turn.runner import TurnRunner
from shared import logs
from shared.protocol import (
    MAX_PROMPT_ATTACHMENT_BYTES,
    AdmissionQueued,
    PromptSubmitParams,
    Receipt,
    SessionRegenerateParams,
    TurnStarted,
    TurnStatus,
    Usage,
)

log = logging.getLogger("authority")

# While the store cannot write: the first wait, doubled up to the last (a commit elsewhere
# that succeeds cuts any wait short).
RETRY_FIRST_S = 0.25
RETRY_MAX_S = 5.0
# Why a regeneration did not run (its receipt's failure_reason, for people).
NOT_LAST = ("Not regenerated: another prompt was answered after it was asked for, and only "
            "the last answer can be regenerated.")


@dataclass(frozen=True)
class LostTurn:
    """A turn that ended but whose end could not be saved: still `started` on disk."""

    admission_id: str
    turn_id: str
    holder: Holder

    def settle(self, tx: Tx) -> bool:
        return settle_lost(tx, self.admission_id, self.turn_id, self.holder)


class SessionAuthority:
    def __init__(self, db: Database, runner: TurnRunner, epoch: int) -> None:
        self.db = db
        self.runner = runner
        self.epoch = epoch
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._active = Routes()  # the running turns, by the session each runs in now
        self._accepting = True
        self._retired: set[str] = set()
        self._lost: dict[str, LostTurn] = {}  # by admission id
        self._retry_now = asyncio.Event()  # set (and replaced) to cut store waits short
        self._background: set[asyncio.Task[None]] = set()

    # --- input ----------------------------------------------------------------

    async def submit(self, principal: str, params: PromptSubmitParams) -> Receipt:
        """Admits input durably; the same (principal, session, request_id) runs once."""
        payload = normalize(params)
        may_start = self._accepting and params.intent != "interrupt"
        retired = frozenset(self._retired)

        def job(tx: Tx) -> tuple[Receipt, Claim | None]:
            existing = _admitted_before(tx, principal, params)
            if existing is not None:
                if existing.payload_digest != payload.digest:
                    raise _reused(params.request_id)
                return wire.receipt(admissions.receipt(tx, existing, duplicate=True)), None
            if not sessions.exists(tx, params.session_id):
                raise NotFound("session", params.session_id)
            receipt = admit(tx, principal, params.session_id, params.request_id, payload)
            # An idle session starts the turn in this same commit (one durable write fewer
            # per prompt); `_claim` takes it only if nothing older is queued or running.
            claim = self._claim(tx, params.session_id) \
                if may_start and params.session_id not in retired else None
            return receipt, claim

        self._settle_lost_first()  # so that this prompt finds them `unknown` and moves on
        receipt, claim = await self.db.write(job)
        params.session_id = receipt.session_id
        if claim is not None:
            self._start(claim)
        elif not receipt.duplicate:
            await self.stop_review(params.session_id)
            if params.intent == "interrupt":
                self.interrupt(params.session_id, NEWER_PROMPT)
            elif params.intent == "steer":
                running = self._active.find(params.session_id)
                if running is not None:
                    running.steer_waiting = True  # it joins at the turn's next model call
            self.wake(params.session_id)  # the turn may end first: then it runs next
        return receipt

    async def regenerate(self, principal: str, params: SessionRegenerateParams) -> Receipt:
        """Admits another answer to a prompt (the session's last, which `message_id` may name)
        exactly as `submit` admits a prompt: the same row, key, event, queue and claim.  Its
        payload is the prompt's text and message id; its turn stores no user row, and when
        it takes the session the prompt's other answers leave the model's view
        (`turn/route.take_session`).  A prompt answered after it was admitted makes it
        `rejected` when its turn would start (`_claim`): only the last answer is replaced."""
        asked = _prompt_param(params.message_id)
        may_start = self._accepting
        retired = frozenset(self._retired)

        def job(tx: Tx) -> tuple[Receipt, Claim | None]:
            existing = _admitted_before(tx, principal, params)
            if existing is not None:
                again = Payload.from_json(existing.payload_json).regenerates
                if again is None or (asked is not None and again != message_id(asked)):
                    raise _reused(params.request_id)
                return wire.receipt(admissions.receipt(tx, existing, duplicate=True)), None
            if not sessions.exists(tx, params.session_id):
                raise NotFound("session", params.session_id)
            prompt = answers.last_prompt(tx, params.session_id)
            if prompt is None:
                raise InvalidParams("session_id", "the session has no prompt to answer again yet")
            if asked is not None and asked != prompt.id:
                raise InvalidParams("message_id", "only the last prompt's answer can be "
                                    "regenerated; to change an earlier one, branch from it "
                                    "(session.fork)")
            payload = Payload(text=prompt.content, regenerates=prompt.message_id)
            receipt = admit(tx, principal, params.session_id, params.request_id, payload)
            claim = self._claim(tx, params.session_id) \
                if may_start and params.session_id not in retired else None
            return receipt, claim

        self._settle_lost_first()
        receipt, claim = await self.db.write(job)
        params.session_id = receipt.session_id
        if claim is not None:
            self._start(claim)
        elif not receipt.duplicate:
            await self.stop_review(params.session_id)
            self.wake(params.session_id)
        return receipt

    def admit_internal(
        self, tx: Tx, principal: str, session_id: str, request_id: str, payload: Payload,
    ) -> tuple[Receipt, Claim | None]:
        """Admits input inside the caller's write job (a schedule's firing), exactly as
        `submit` does: the same row, event and claim.  The session must exist and the
        (principal, session, request_id) be new.  After the commit the caller must pass
        both to `admitted`, so the turn starts or the drainer looks."""
        receipt = admit(tx, principal, session_id, request_id, payload)
        claim = self._claim(tx, session_id) \
            if self._accepting and session_id not in self._retired else None
        return receipt, claim

    def admitted(self, receipt: Receipt, claim: Claim | None) -> None:
        """After the commit of `admit_internal`'s job: runs the claimed turn, or wakes the
        session's drainer."""
        if claim is not None:
            self._start(claim)
        else:
            self.wake(receipt.session_id)
            task = asyncio.create_task(self.stop_review(receipt.session_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def cancel(self, admission_id: str) -> Receipt:
        def job(tx: Tx) -> Receipt:
            row = _existing(tx, admission_id)
            if row.status != "queued":
                raise AdmissionState(
                    f"admission is {row.status}; only a queued one can be cancelled"
                )
            admissions.settle(tx, admission_id, "cancelled")
            settle_event(tx, admission_id)
            return _receipt(tx, admission_id)

        return await self.db.write(job)

    async def resolve(self, admission_id: str) -> Receipt:
        def job(tx: Tx) -> Receipt:
            row = _existing(tx, admission_id)
            if row.status != "unknown":
                raise AdmissionState(
                    f"admission is {row.status}; only an unknown one can be resolved"
                )
            _resolve_unknown(tx, admission_id)
            return _receipt(tx, admission_id)

        self._settle_lost_first()  # a lost turn is `unknown` by the time this job looks
        receipt = await self.db.write(job)
        self.wake(receipt.session_id)
        return receipt

    # --- turns ----------------------------------------------------------------

    def interrupt(self, session_id: str, reason: str = DEFAULT_REASON) -> bool:
        turn = self._active.find(session_id)
        if turn is None:
            return False
        turn.interrupt(reason)
        return True

    async def stop_review(self, session_id: str) -> None:
        """A person's input arrived: the session's background review, if one runs, stops now
        (here, or on a shared store in the backend that runs it: a store signal naming that
        review's turn, so a person's turn that started meanwhile is left alone).  A review
        queued there was already cancelled by the admission (`admit`)."""
        turn = self._active.find(session_id)
        if turn is not None:
            if turn.claim.review_of is not None:
                turn.interrupt(NEWER_PROMPT)
            return
        row = await self.db.read(lambda tx: admissions.blocking(tx, session_id))
        if row is not None and row.principal == admissions.REVIEW and row.turn_id \
                and row.owner_epoch != self.epoch:
            await self.db.signal({"kind": "interrupt", "session_id": session_id,
                                  "review_turn": row.turn_id})

    def interrupt_review(self, session_id: str, turn_id: str) -> None:
        """Another backend's request: stop the review `turn_id` if it runs here."""
        turn = self._active.find(session_id)
        if turn is not None and turn.turn_id == turn_id and turn.claim.review_of is not None:
            turn.interrupt(NEWER_PROMPT)

    def running(self, session_id: str) -> RunningTurn | None:
        """The turn running in a session: started there, or moved there by rotation."""
        return self._active.find(session_id)

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

    def _start(self, claim: Claim) -> None:
        """Runs a turn claimed with its admission, in a drainer that goes on with the queue.
        A drainer of the session still winding down finds the queue held and ends."""
        self._drainers[claim.session_id] = asyncio.create_task(
            self._drain(claim.session_id, claim), name=f"drain-{claim.session_id}")

    async def _drain(self, session_id: str, first: Claim | None = None) -> None:
        try:
            while first is not None or (self._accepting and session_id not in self._retired):
                self._dirty.discard(session_id)
                claim, first = first or await self._next_claim(session_id), None
                if claim is None:
                    if session_id in self._dirty:
                        continue
                    return
                turn = RunningTurn(claim, self._active)
                try:
                    unsaved, status = await self._run(turn)
                finally:
                    turn.done()
                    if turn.session_id != session_id:
                        self.wake(turn.session_id)  # its queue moved with it
                if unsaved is not None:
                    await self._settle_lost(turn, unsaved, session_id)
                elif status == "completed" and claim.reviewable and turn.session_id == session_id:
                    first = await self._queue_review(turn)
        except Exception:
            logs.internal(log, "drainer of session %s stopped", session_id)
        finally:
            if self._drainers.get(session_id) is asyncio.current_task():
                del self._drainers[session_id]

    async def _next_claim(self, session_id: str) -> Claim | None:
        """The session's next turn, claimed; None when there is none or the drainer must
        stop.  A store that cannot write is waited out: the queued rows stay queued."""
        delay = RETRY_FIRST_S
        while self._accepting and session_id not in self._retired:
            try:
                return await self.db.write(lambda tx: self._claim(tx, session_id))
            except StoreUnavailable as exc:
                if delay == RETRY_FIRST_S:
                    log.warning("session %s: cannot claim its next turn (%s); trying again "
                                "until the database takes writes", session_id, exc.message)
                await self._wait_for_store(delay)
                delay = min(delay * 2, RETRY_MAX_S)
        return None

    async def _run(self, turn: RunningTurn) -> tuple[str | None, TurnStatus | None]:
        """Runs the turn (or a review); returns why its end could not be saved (None when it
        was) and how it ended (None when not known)."""
        try:
            if turn.claim.review_of is not None:
                await self.runner.reviewer.run(turn, turn.claim.review_of)
                return None, None
            return None, await self.runner.run(turn)
        except LeaseLost:
            # Another process took the session (this one was paused past its lease, or its
            # peers declared it dead): the taker ended the turn; nothing more is ours to write.
            log.warning("turn %s of session %s was taken over by another process; it wrote "
                        "nothing more", turn.turn_id, turn.session_id)
            return None, None
        except StoreUnavailable as exc:
            return exc.message, None
        except Exception:
            error_id = logs.internal(log, "turn %s crashed", turn.turn_id)
            if await self._settle_crashed(turn, error_id):
                return None, None
            return f"it crashed (error_id {error_id}), then the store failed", None

    async def _queue_review(self, turn: RunningTurn) -> Claim | None:
        """After a person's turn completed: with `[review] enabled` and nothing else queued,
        admits the background review of that turn (once per turn, whichever process gets
        there: its request id is the turn's) and claims it.  Never raises."""
        if not self._accepting or not self.runner.config.config.review.enabled:
            return None  # stopping or draining: no new work starts here
        sid, key = turn.session_id, f"{admissions.REVIEW}:{turn.turn_id}"

        def job(tx: Tx) -> Claim | None:
            if admissions.open_rows(tx, sid) or admissions.by_key(tx, admissions.REVIEW, sid, key):
                return None  # a person's input waits: it goes first, and no review is owed
            payload = Payload(text="")
            admissions.insert(tx, new_id("adm"), admissions.REVIEW, sid, key, payload.to_json(),
                              payload.digest)
            return self._claim(tx, sid)

        try:
            return await self.db.write(job)
        except Exception as exc:  # a review is worth nothing next to the queue moving on
            log.warning("session %s: no review of turn %s: %r", sid, turn.turn_id, exc)
            return None

    def _claim(self, tx: Tx, session_id: str) -> Claim | None:
        """Takes the oldest queued row unless the session's queue is held; starts its turn.
        A backend its peers declared dead claims nothing (it stops at its next beat)."""
        if not peers.standing(tx, self.epoch) or not admissions.lock_queue(tx, session_id) \
                or admissions.blocking(tx, session_id) is not None:
            return None
        row = self._next_row(tx, session_id)
        if row is None:
            return None
        session = sessions.row(tx, session_id)
        assert session is not None
        if row.principal == admissions.REVIEW:
            return self._claim_review(tx, row, session.cwd, session.provider)
        turn_id = new_id("turn")
        admission_id = row.admission_id
        admissions.mark_started(tx, admission_id, self.epoch, turn_id)
        payload = Payload.from_json(row.payload_json)
        again = message_rowid(payload.regenerates) if payload.regenerates else None
        holder = Holder.here(self.epoch, turn_id)
        model = session.model or self.runner.default_model()
        # turn.started first: a regeneration's answer.chosen (below) is an event of its turn.
        wire.emit(
            tx, session_id,
            TurnStarted(turn_id=turn_id, admission_id=admission_id, model=model,
                        regenerates=payload.regenerates),
            turn_id=turn_id, admission_id=admission_id,
        )
        # The lease, when free, is taken in the claim's own transaction (the common case
        # costs nothing extra); otherwise the runner waits for it before writing the
        # user's row, since the transcript belongs to the lease holder.
        leased = take_session(tx, session_id, holder, self.runner.config.config.lease.ttl_s,
                              turn_id, payload.text, regenerates=again,
                              admission_id=admission_id) is None
        sessions.touch(tx, session_id)
        steers = admissions.steer_queued(tx, session_id)
        reviewable = session.delegated_from is None and not row.principal.startswith(
            (admissions.SCHEDULED, DELEGATE_PRINCIPAL))
        depth = sessions.delegation_depth(tx, session_id) if session.delegated_from else 0
        return Claim(session_id, admission_id, turn_id, payload.text, session.cwd, holder, leased,
                     steers, session.provider, again, reviewable=reviewable, depth=depth)

    def _claim_review(self, tx: Tx, row: AdmissionRecord, cwd: str,
                      provider: str | None) -> Claim | None:
        """A background review's claim: `started` and the lease taken, quietly (no
        turn.started, no transcript row).  A session another process holds is not waited
        for: the review is dropped."""
        session_id, turn_id = row.session_id, new_id("turn")
        admissions.mark_started(tx, row.admission_id, self.epoch, turn_id)
        holder = Holder.here(self.epoch, turn_id)
        if try_take(tx, session_id, holder, self.runner.config.config.lease.ttl_s) is not None:
            admissions.settle(tx, row.admission_id, "cancelled",
                              failure_reason="the session was busy in another process")
            return None
        return Claim(session_id, row.admission_id, turn_id, "", cwd, holder, provider=provider,
                     review_of=row.request_id.removeprefix(f"{admissions.REVIEW}:"))

    @staticmethod
    def _next_row(tx: Tx, session_id: str) -> AdmissionRecord | None:
        """The oldest queued row that can run.  A regeneration whose prompt is no longer the
        last (one queued before it was answered meanwhile) is settled `rejected` on the way:
        replacing that answer would leave later turns built on an answer no longer shown."""
        while (row := admissions.oldest_queued(tx, session_id)) is not None:
            again = Payload.from_json(row.payload_json).regenerates
            last = answers.last_prompt(tx, session_id) if again else None
            if again is None or (last is not None and last.message_id == again):
                return row
            admissions.settle(tx, row.admission_id, "rejected", failure_reason=NOT_LAST)
            settle_event(tx, row.admission_id)
        return None

    async def _settle_crashed(self, turn: RunningTurn, error_id: str) -> bool:
        """A bug escaped the runner: settle the admission so the queue is not held forever.
        False when that could not be saved."""
        outcome = TurnEnd(
            turn.session_id, turn.admission_id, turn.turn_id, "failed", "", Usage(),
            f"an internal error ended this turn; the backend log (DIR/logs/backend.log) has "
            f"details under error_id {error_id}", holder=turn.holder,
        )
        try:
            await self.db.write_patiently(lambda tx: close_turn(tx, outcome), CLOSE_RETRY_S)
        except StoreUnavailable:
            return False
        except Exception:
            logs.internal(log, "could not settle crashed turn %s", turn.turn_id)
            return False
        return True

    # --- turns whose end could not be saved ---------------------------------------

    async def _settle_lost(self, turn: RunningTurn, why: str, drained: str) -> None:
        """Settles a turn whose end could not be saved `unknown` in place, as soon as the
        store takes writes again; until then its `started` row holds the session's queue.
        Shutdown (or the session's deletion) stops trying: the next start's recovery
        gives the row the same state."""
        lost = LostTurn(turn.admission_id, turn.turn_id, turn.holder)
        self._lost[lost.admission_id] = lost
        log.warning("turn %s: its end could not be saved (%s); it becomes unknown once the "
                    "database takes writes again", turn.turn_id, why)
        delay = RETRY_FIRST_S
        while lost.admission_id in self._lost and self._accepting and drained not in self._retired:
            try:
                settled = await self.db.write(lost.settle)
            except StoreUnavailable:
                await self._wait_for_store(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            self._lost_settled(lost, settled)

    def _settle_lost_first(self) -> None:
        """Queues the settlement of every lost turn ahead of the caller's write: if that
        write commits, so do they, before it (jobs commit in the order queued)."""
        for lost in list(self._lost.values()):
            future = self.db.enqueue(lost.settle)
            future.add_done_callback(functools.partial(self._lost_done, lost))

    def _lost_done(self, lost: LostTurn, future: asyncio.Future[bool]) -> None:
        if not future.cancelled() and future.exception() is None:  # else its drainer retries
            self._lost_settled(lost, future.result())

    def _lost_settled(self, lost: LostTurn, settled: bool) -> None:
        if self._lost.pop(lost.admission_id, None) is not None and settled:
            log.warning("turn %s is unknown now; the next prompt or admission.resolve moves "
                        "its session on", lost.turn_id)
        self._wake_waiters()

    async def _wait_for_store(self, delay: float) -> None:
        """Sleeps `delay`, or less if a lost turn settles (the store takes writes) or the
        authority stops meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry_now.wait(), delay)

    def _wake_waiters(self) -> None:
        self._retry_now.set()  # wakes every waiter of this event; later ones wait anew
        self._retry_now = asyncio.Event()

    async def retire(self, session_id: str) -> None:
        """Stops the session's drainer for good (before deletion), interrupting its turn."""
        self._retired.add(session_id)
        self.interrupt(session_id, SESSION_DELETED)
        self._wake_waiters()  # a drainer waiting on the store stops waiting
        task = self._drainers.get(session_id)
        if task is not None and not task.done():
            await task

    # --- lifecycle --------------------------------------------------------------

    def start(self, session_ids: list[str]) -> None:
        for sid in session_ids:
            self.wake(sid)

    def busy(self) -> bool:
        return bool(self._active)

    def hold(self) -> None:
        """Starts nothing new (queued and newly admitted input stays queued for the next
        start); the turns running go on."""
        self._accepting = False
        self._wake_waiters()

    async def stop(self, grace_s: float = 10.0) -> None:
        """Starts nothing new; lets running turns finish within the grace, then interrupts them."""
        self._accepting = False
        self._wake_waiters()  # a drainer waiting on the store stops waiting
        tasks = [t for t in self._drainers.values() if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_s * 0.7)
        if pending:
            for turn in self._active:
                turn.interrupt(SHUTDOWN)
            await asyncio.wait(pending, timeout=grace_s * 0.3)


def admit(tx: Tx, principal: str, session_id: str, request_id: str, payload: Payload) -> Receipt:
    """Inserts a queued admission and its `admission.queued` event into an existing session
    (the caller checked it exists and the key is new).  Claiming its turn is the caller's."""
    # The person moving on acknowledges a turn whose outcome is unknown.
    for unknown_id in admissions.unknown_ids(tx, session_id):
        _resolve_unknown(tx, unknown_id)
    # A review never delays a person's input: one still queued is dropped.
    admissions.cancel_queued_reviews(tx, session_id)
    admission_id = new_id("adm")
    admissions.insert(tx, admission_id, principal, session_id, request_id,
                      payload.to_json(), payload.digest)
    if payload.attachments:
        _name_files(tx, admission_id, payload)
    # Named in the admission's transaction, so the session.updated this commit
    # broadcasts already carries the title (a title a person chose is kept).
    sessions.name_untitled(tx, session_id, payload.title())
    receipt = _receipt(tx, admission_id)
    wire.emit(tx, session_id, AdmissionQueued(receipt=receipt), admission_id=admission_id)
    return receipt


def _name_files(tx: Tx, admission_id: str, payload: Payload) -> None:
    """The admission's files, recorded in its transaction: each must be held whole (the
    collection cannot remove it between this check and the commit: it writes too)."""
    try:
        held = files.admit(tx, admission_id, list(payload.attachments))
    except LookupError as exc:
        raise InvalidParams(f"attachments.{exc.args[0]}.sha256",
                            "no such file is held: upload it first (attachment.upload)") from None
    total = sum(f.bytes for f in held)
    if total > MAX_PROMPT_ATTACHMENT_BYTES:
        raise InvalidParams("attachments", f"the files of one prompt may have at most "
                            f"{MAX_PROMPT_ATTACHMENT_BYTES // (1024 * 1024)} MiB together; "
                            f"these have {total} bytes")


def _prompt_param(value: str | None) -> int | None:
    """`message_id` as a row id (None when not given); -32602 naming it when it is none."""
    if value is None:
        return None
    try:
        return message_rowid(value)
    except ValueError:
        raise InvalidParams("message_id", f"{value[:200]!r} is not a message_id") from None


def _existing(tx: Tx, admission_id: str) -> AdmissionRecord:
    row = admissions.by_id(tx, admission_id)
    if row is None:
        raise NotFound("admission", admission_id)
    return row


def _receipt(tx: Tx, admission_id: str) -> Receipt:
    row = admissions.by_id(tx, admission_id)
    assert row is not None
    return wire.receipt(admissions.receipt(tx, row))


def _resolve_unknown(tx: Tx, admission_id: str) -> None:
    admissions.settle(
        tx, admission_id, "interrupted",
        failure_reason="its outcome is unknown: the backend stopped, or could not save its "
        "end, while it ran",
    )
    settle_event(tx, admission_id)


def _admitted_before(
    tx: Tx, principal: str, params: PromptSubmitParams | SessionRegenerateParams,
) -> AdmissionRecord | None:
    """The admission this request id already made, looked up where it was sent and where it
    would run: a conversation that compression rotated continues in its newest session,
    which `params.session_id` becomes."""
    sent_to = params.session_id
    params.session_id = compression.leaf(tx, sent_to)
    return admissions.by_key(tx, principal, sent_to, params.request_id) \
        or admissions.by_key(tx, principal, params.session_id, params.request_id)


def _reused(request_id: str) -> AdmissionConflict:
    return AdmissionConflict(f"request_id {request_id!r} was already used with different input "
                             "in this session; use a new request_id for new input")
