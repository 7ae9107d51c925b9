"""Questions back to the person: the `clarify` tool's wait, clarify.list / clarify.respond, expiry.

A question is a row in `questions` plus a `clarify.request` event, committed together
through the turn's fence, so by the time a client sees it the session reports
`waiting_answer`.  The call waits like an approval's (the batch deadline pauses) until an
answer wakes it, `clarify.timeout_s` runs out (`expired`, by "timeout") or the turn is
interrupted (`cancelled`, by "stopped").  The first answer wins: each closing is an update
fenced on `pending`, and the waiting call reads the stored row.

A question outlives a crash: recovery leaves it pending (its turn becomes `unknown`, as
every crashed turn does).  An answer to a question whose turn no longer runs is admitted,
in the answer's transaction, as a prompt of the session's own (principal `clarify`,
request id `clarify:<question_id>`), which settles the `unknown` turn as any prompt does
and runs.  Nobody answering such a question until its `expires_at` expires it: a sweep at
start-up and every `SWEEP_S` seconds.  The same sweep hears an answer its turn never read:
one given while the turn still counted as running but its process had died (on a shared
store, until a peer declares it dead; anywhere, a crash between the answer's commit and the
call's read).  Once that turn is marked lost its call's result is `unknown`, and the answer
is admitted as a prompt as above; a takeover pokes the sweep so it does not wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

from backend import wire
from backend.authority.payload import Payload
from backend.authority.queue import SessionAuthority
from backend.config import ConfigFile
from backend.errors import InvalidParams, NotFound, QuestionClosed, StoreUnavailable
from backend.ids import new_id, stamp
from backend.store import admissions, compression, questions, sessions
from backend.store.db import Database, Tx
from backend.store.events import StoredEvent
from backend.store.questions import QuestionRecord
from backend.tools.base import ToolContext
from backend.tools.clarify import Asked
from backend.turn.route import Claim
from shared import protocol as p
from shared.literals import DecidedBy, QuestionStatus

log = logging.getLogger("authority")

PRINCIPAL = "clarify"  # the follow-up prompts' principal
SWEEP_S = 30.0  # how often pending questions past their expiry are expired
RESOLVED = p.EVENT_NAMES[p.QuestionResolved]  # the stored event `observe` wakes on


def request_id(question_id: str) -> str:
    """The follow-up admission's request id: one per question, so it is admitted once."""
    return f"clarify:{question_id}"


def followup_text(question: str, answer: str) -> str:
    """The follow-up prompt: what the model asked and what the person answered."""
    return f"Earlier you asked: «{question}»\nThe person answered: «{answer}»"


class Questions:
    def __init__(self, db: Database, config: ConfigFile, authority: SessionAuthority) -> None:
        self.db = db
        self.config = config
        self.authority = authority
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._pokes: set[asyncio.Task[None]] = set()

    # --- the tool's wait ---------------------------------------------------------------

    async def ask(self, ctx: ToolContext, question: str, choices: list[str],
                  allow_other: bool) -> Asked:
        """See `tools/clarify.Asker.ask`.  Every write here is the turn's, through its fence."""
        fence = ctx.fence
        assert fence is not None, "the executor gives every call its turn's fence"
        question_id = new_id("qst")
        timeout = self.config.config.clarify.timeout_s
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[question_id] = future

        def job(tx: Tx) -> None:
            row = questions.insert(
                tx, question_id=question_id, session_id=fence.session_id, turn_id=ctx.turn_id,
                call_id=ctx.call_id, question=question, choices=choices,
                allow_other=allow_other, expires_at=stamp(time.time() + timeout))
            _announce(tx, p.QuestionAsked, row)

        ctx.on_person(+1)  # the batch deadline does not count a person's thinking
        try:
            await fence.write(job)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), timeout)
            # Answered, or the time ran out; an answer may have come just as it did: the
            # stored row decides.
            row = await fence.write(lambda tx: _close(tx, question_id, "expired", "timeout"))
            return _asked(row, timeout)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(fence.write(
                    lambda tx: _close(tx, question_id, "cancelled", "stopped")))
            raise
        finally:
            ctx.on_person(-1)
            self._waiting.pop(question_id, None)

    def observe(self, item: Any) -> None:
        """Wakes the wait of a question answered through another backend on the same
        database (its `clarify.resolved` came from the store); the stored row decides."""
        if not isinstance(item, StoredEvent) or item.event.type != RESOLVED:
            return
        question = item.event.data.get("question")
        if isinstance(question, dict):
            self._wake(str(question.get("question_id", "")))

    def _wake(self, question_id: str) -> None:
        future = self._waiting.get(question_id)
        if future is not None and not future.done():
            future.set_result(None)

    # --- clarify.list, clarify.respond ----------------------------------------------------

    async def pending(self, session_id: str | None) -> list[p.Question]:
        def read(tx: Tx) -> list[p.Question]:
            if session_id is not None and not sessions.exists(tx, session_id):
                raise NotFound("session", session_id)
            return [wire.question(q) for q in questions.pending(tx, session_id)]

        return await self.db.read(read)

    async def respond(self, question_id: str, choice: int | None, answer: str | None) -> p.Question:
        """A person's answer (exactly one of `choice` and `answer`).  The same answer again
        returns the question as it stands; another, or one to a closed question, raises
        QuestionClosed.  An answer to a question whose turn no longer runs is admitted as a
        prompt (`followup_admission_id`)."""
        if (choice is None) == (answer is None):
            raise InvalidParams("choice" if choice is None else "answer",
                                "give exactly one of choice (an index into the question's "
                                "choices) and answer (your own words)")
        claimed: list[tuple[p.Receipt, Claim | None]] = []

        def job(tx: Tx) -> p.Question:
            claimed.clear()  # a retried job starts again
            row = questions.row(tx, question_id)
            if row is None:
                raise NotFound("question", question_id)
            text, index = _answer_of(row, choice, answer)
            if row.status != "pending":
                if row.status == "answered" and (row.answer, row.choice) == (text, index):
                    return wire.question(row)  # a retry: answered already, as asked
                raise QuestionClosed(f"question {question_id} is already {row.status}; "
                                     "nothing to answer")
            questions.answer(tx, question_id, text, index)
            if not _turn_runs(tx, row):
                claimed.append(self._follow_up(tx, row, text))
            closed = questions.row(tx, question_id)
            assert closed is not None
            return _announce(tx, p.QuestionResolved, closed)

        question = await self.db.write(job)
        for receipt, claim in claimed:
            self.authority.admitted(receipt, claim)
        self._wake(question_id)
        log.info("question %s answered%s", question_id,
                 f" (follow-up {question.followup_admission_id})"
                 if question.followup_admission_id else "")
        return question

    def _follow_up(self, tx: Tx, row: QuestionRecord, text: str) -> tuple[p.Receipt, Claim | None]:
        """Admits the answer as a prompt of the session (where a rotated conversation
        continues), once per question; names it on the question."""
        target = compression.leaf(tx, row.session_id)
        rid = request_id(row.question_id)
        existing = admissions.by_key(tx, PRINCIPAL, target, rid)
        if existing is not None:  # cannot happen while the question was pending; kept safe
            receipt = wire.receipt(admissions.receipt(tx, existing, duplicate=True))
            claim: Claim | None = None
        else:
            receipt, claim = self.authority.admit_internal(
                tx, PRINCIPAL, target, rid, Payload(text=followup_text(row.question, text)))
        questions.set_followup(tx, row.question_id, receipt.admission_id)
        return receipt, claim

    # --- expiry of questions nobody waits for ---------------------------------------------

    def start(self) -> None:
        """Expires what is past due now and every SWEEP_S seconds (a question whose turn a
        restart ended keeps its `expires_at`)."""
        self._sweeper = asyncio.create_task(self._sweep(), name="questions-sweep")

    async def stop(self) -> None:
        tasks = [t for t in (self._sweeper, *self._pokes) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _sweep(self) -> None:
        while True:
            await self.sweep_once()
            await asyncio.sleep(SWEEP_S)

    def poke(self) -> None:
        """A sweep now, not in up to SWEEP_S (a peer's turns were just taken over: an answer
        given while its backend was dying is heard at once)."""
        task = asyncio.create_task(self.sweep_once(), name="questions-poke")
        self._pokes.add(task)
        task.add_done_callback(self._pokes.discard)

    async def sweep_once(self) -> None:
        """Expires what is due, and admits the answers no turn heard as prompts."""
        heard: list[tuple[p.Receipt, Claim | None]] = []

        def job(tx: Tx) -> int:
            heard.clear()  # a retried job starts again
            expired = expire_due(tx, time.time())
            for row in questions.unheard(tx):
                if row.answer is not None:
                    heard.append(self._follow_up(tx, row, row.answer))
            return expired

        try:
            expired = await self.db.write(job)
        except StoreUnavailable as exc:
            log.warning("pending questions could not be swept: %s", exc.message)
            return
        if expired:
            log.info("%d unanswered questions expired", expired)
        for receipt, claim in heard:
            log.info("an answer its turn never read was admitted as prompt %s",
                     receipt.admission_id)
            self.authority.admitted(receipt, claim)


def expire_due(tx: Tx, now_s: float) -> int:
    """Expires the pending questions whose time has come, whoever asked them (a live turn's
    own wait reads the stored row and tells its model nobody answered)."""
    due = [q for q in questions.pending(tx) if _seconds(q.expires_at) <= now_s]
    for q in due:
        _close(tx, q.question_id, "expired", "timeout")
    return len(due)


def _close(tx: Tx, question_id: str, status: QuestionStatus, by: DecidedBy) -> QuestionRecord | None:
    """Closes the question unless it was answered (or closed) already; returns it as it
    stands (None when it went with its session)."""
    closed = questions.close(tx, question_id, status, by)
    row = questions.row(tx, question_id)
    if row is not None and closed:
        _announce(tx, p.QuestionResolved, row)
    return row


def _asked(row: QuestionRecord | None, timeout: float) -> Asked:
    if row is None or row.status != "answered" or row.answer is None:
        return Asked("expired", timeout_s=timeout, question_id=row.question_id if row else "")
    return Asked("answered", row.answer, row.choice, question_id=row.question_id)


def _answer_of(row: QuestionRecord, choice: int | None, answer: str | None) -> tuple[str, int | None]:
    """(the answer's text, the choice's index or None), checked against the question."""
    if choice is not None:
        if choice >= len(row.choices):
            raise InvalidParams("choice", f"the question has {len(row.choices)} choices "
                                f"(0 to {len(row.choices) - 1})" if row.choices
                                else "the question has no choices: answer in words")
        return row.choices[choice], choice
    assert answer is not None
    if row.choices and not row.allow_other:
        raise InvalidParams("answer", "this question takes only one of its choices")
    if not answer.strip():
        raise InvalidParams("answer", "the answer is empty")
    return answer.strip(), None


def _turn_runs(tx: Tx, row: QuestionRecord) -> bool:
    """Whether the turn that asked still runs (and so waits for the answer): its admission
    is `started`.  After a restart it is `unknown`; then the answer becomes a prompt."""
    admission_id = admissions.of_turn(tx, row.session_id, row.turn_id)
    found = admissions.by_id(tx, admission_id) if admission_id else None
    return found is not None and found.status == "started"


def _seconds(stamp_: str) -> float:
    return datetime.fromisoformat(stamp_.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def _announce(tx: Tx, kind: type[p.QuestionAsked | p.QuestionResolved], row: QuestionRecord) -> p.Question:
    """Told to the session's subscribers and to every reader, as approvals are
    (`wire.emit_to_all`).  Returns the question as sent."""
    question = wire.question(row)
    wire.emit_to_all(tx, row.session_id, kind(question=question), row.turn_id)
    return question
