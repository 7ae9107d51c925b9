"""The one owner of a running turn's routing state: where it runs, and how to stop it.

A claimed turn starts in the session it was claimed from; a compression
rotation moves it to a child session mid-turn.  `RunningTurn` holds the ids,
the session the turn runs in now, the interrupt (event and reason) and the
lease watch, and `rotated` is the only way to move it: the watch, and the
`Routes` map the authority finds running turns in (turn.interrupt, shutdown,
session.delete), follow in the same call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from backend import wire
from backend.store import answers, attachments, messages
from backend.store.db import Database, Tx
from backend.store.leases import Holder, LeaseRecord
from backend.turn.lease import LeaseWatch, try_take
from shared.protocol import AnswerChosen

# Why a turn was stopped, as the person reads it (the closing note, failure_reason).
DEFAULT_REASON = "Stopped by you."
NEWER_PROMPT = "Stopped for your newer message."
SESSION_DELETED = "The session was deleted while the turn ran."
SHUTDOWN = "The Turnkey service shut down while the turn ran."
# The same, as the model reads it in the results of the calls the stop cut short ("you"
# would be the model there).
_FOR_MODEL = {
    DEFAULT_REASON: "the user stopped the turn",
    NEWER_PROMPT: "the user sent a newer message, which stopped the turn",
}


def for_model(reason: str) -> str:
    """A stop's reason as tool results tell the model (no final period)."""
    return _FOR_MODEL.get(reason, reason).rstrip(".")


@dataclass(frozen=True)
class Claim:
    """A turn the drainer has claimed: its admission is `started`.  `leased`: the claim
    took the session's lease and stored the user's row in the same transaction.
    `session_id` is where it was claimed; where it runs now is `RunningTurn.session_id`."""

    session_id: str
    admission_id: str
    turn_id: str
    text: str
    cwd: str
    holder: Holder
    leased: bool = True
    steers: bool = False  # other steers were queued at the claim: they join this turn
    provider: str | None = None  # the session's own provider at the claim; None: the default
    regenerates: int | None = None  # session.regenerate's: the row id of the prompt it answers
    # A background review's claim (turn/review.py): the id of the turn it reviews.
    review_of: str | None = None
    # A person's turn (not a sub-agent's, a schedule's or a review): once completed, the
    # background review may follow it.
    reviewable: bool = False
    # Delegations below a person's session (read in the claim's transaction; None: not read,
    # the runner reads it before its first request).
    depth: int | None = None


def take_session(
    tx: Tx, session_id: str, holder: Holder, ttl: float, turn_id: str, text: str, *,
    regenerates: int | None = None, admission_id: str | None = None,
) -> LeaseRecord | None:
    """Takes the session's lease for a claimed turn and stores the user's row in the same
    transaction (the transcript belongs to the lease holder); returns the row that holds
    the lease instead when it is not free, and writes nothing then.  The only writer of a
    turn's user row: the claim calls it in its own transaction, and a turn that found the
    lease held calls it from its wait for the lease.

    A turn that answers a prompt again (`regenerates`, the prompt's row id) stores no user
    row: the prompt's other answers leave the model's view instead, and `answer.chosen` says
    this turn's answer is the one shown (store/answers.py)."""
    held = try_take(tx, session_id, holder, ttl)
    if held is None:
        if regenerates is None:
            # The files sent with the prompt: the model reads them, people see them.
            files = attachments.of_admission(tx, admission_id) if admission_id else []
            messages.insert(tx, session_id, "user", text, turn_id=turn_id,
                            meta={"attachments": files} if files else None)
        else:
            _answer_again(tx, session_id, turn_id, regenerates, admission_id)
    return held


def _answer_again(tx: Tx, session_id: str, turn_id: str, prompt_rowid: int,
                  admission_id: str | None) -> None:
    prompt = answers.prompt_at(tx, session_id, prompt_rowid)
    if prompt is None:
        return  # (the claim checked it is the last prompt; nothing writes prompts meanwhile)
    answers.show(tx, session_id, answers.exchange(tx, session_id, prompt), turn_id)
    wire.emit(tx, session_id, AnswerChosen(message_id=prompt.message_id, turn_id=turn_id),
              turn_id=turn_id, admission_id=admission_id)


class RunningTurn:
    """A claimed turn while it runs.  Interrupted by turn.interrupt, shutdown, a lost lease
    or the watchdog; the first reason becomes the turn's closing note."""

    def __init__(self, claim: Claim, routes: Routes | None = None) -> None:
        self.claim = claim
        self._session_id = claim.session_id
        self._routes = routes
        self._stop = asyncio.Event()
        self._reason = DEFAULT_REASON
        self._watch: LeaseWatch | None = None
        # Steers may be queued for this turn: set when one is admitted while it runs, or
        # when others were queued at the claim (a steer whose turn ended before it joined
        # runs next, and those queued with it join this turn).  The runner looks at its
        # next model call.
        self.steer_waiting = claim.steers
        if routes is not None:
            routes.add(self)

    # --- ids -------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session the turn runs in now (its claim's, until a rotation moves it)."""
        return self._session_id

    @property
    def admission_id(self) -> str:
        return self.claim.admission_id

    @property
    def turn_id(self) -> str:
        return self.claim.turn_id

    @property
    def holder(self) -> Holder:
        return self.claim.holder

    # --- the interrupt ---------------------------------------------------------------

    def interrupt(self, reason: str = DEFAULT_REASON) -> None:
        if not self._stop.is_set():
            self._reason = reason
            self._stop.set()

    @property
    def interrupted(self) -> bool:
        return self._stop.is_set()

    @property
    def reason(self) -> str:
        return self._reason

    @property
    def stop(self) -> asyncio.Event:
        """Set once the turn is interrupted (to wait on; set it through `interrupt`)."""
        return self._stop

    # --- the lease watch and rotation ------------------------------------------------

    def watch_lease(self, db: Database, *, ttl: float, refresh: float, stall: float) -> LeaseWatch:
        """The turn's lease watch (not started): it refreshes the lease where the turn runs
        now, and interrupts the turn when the lease is lost or the turn stalls."""
        self._watch = LeaseWatch(db, self._session_id, self.holder, ttl=ttl, refresh=refresh,
                                 stall=stall, on_lost=self.interrupt)
        return self._watch

    def rotated(self, child_session_id: str) -> None:
        """Compression moved the turn (its admission and lease) to `child_session_id`."""
        before = self._session_id
        self._session_id = child_session_id
        if self._watch is not None:
            self._watch.session_id = child_session_id
        if self._routes is not None:
            self._routes.moved(self, before)

    def done(self) -> None:
        """The turn ended: nothing finds it any more."""
        if self._routes is not None:
            self._routes.remove(self)
            self._routes = None


class Routes:
    """The running turns, by the session each runs in now."""

    def __init__(self) -> None:
        self._by_session: dict[str, RunningTurn] = {}

    def add(self, turn: RunningTurn) -> None:
        self._by_session[turn.session_id] = turn

    def remove(self, turn: RunningTurn) -> None:
        if self._by_session.get(turn.session_id) is turn:
            del self._by_session[turn.session_id]

    def moved(self, turn: RunningTurn, before: str) -> None:
        if self._by_session.get(before) is turn:
            del self._by_session[before]
        self._by_session[turn.session_id] = turn

    def find(self, session_id: str) -> RunningTurn | None:
        """The turn running in a session: started there, or moved there by rotation."""
        return self._by_session.get(session_id)

    def __iter__(self) -> Iterator[RunningTurn]:
        return iter(list(self._by_session.values()))

    def __bool__(self) -> bool:
        return bool(self._by_session)
