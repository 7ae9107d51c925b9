"""Answers and branches as the methods see them: `session.choose` shows another answer to a
prompt (the one the model reads from then on), `session.fork` starts a session at one of a
session's prompts with the history before it, and admits the edited prompt there.

A regeneration is admitted by the queue (`SessionAuthority.regenerate`), like any input; the
rows and their flags are store/answers.py's and store/branches.py's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from backend import wire
from backend.authority.payload import Payload, prompt_text
from backend.authority.queue import SessionAuthority
from backend.errors import AdmissionConflict, InvalidParams, NotFound, SessionBusy
from backend.ids import message_id, message_rowid
from backend.store import admissions, answers, branches, sessions
from backend.store.db import Database, Tx
from backend.store.sessions import SessionRecord
from backend.tools.checkpoints import Checkpoints
from backend.turn.route import Claim
from shared import protocol as p

BRANCH_PREFIX = "ses_"  # a branch's id: this and 24 hex digits, as every session's
BUSY = "the session is running a turn; wait for it or interrupt it first"
# The statuses in which a turn runs (waiting for a person included).
TURN_RUNS = ("running", "waiting_approval", "waiting_answer")


@dataclass(frozen=True)
class ForkAsk:
    """A fork's checked params: the prompt's row id, the branch's id (made from the caller's
    key, so the same request finds the same branch) and the edited text, if any."""

    session_id: str
    at: int
    branch_id: str
    request_id: str
    text: str | None
    restore_files: bool


class Branches:
    def __init__(self, db: Database, authority: SessionAuthority, checkpoints: Checkpoints) -> None:
        self.db = db
        self.authority = authority
        self.checkpoints = checkpoints

    # --- answers ---------------------------------------------------------------------

    async def choose(self, params: p.SessionChooseParams) -> p.ChooseResult:
        """Shows `turn_id`, one answer of a prompt: its rows become the ones the model reads,
        the prompt's other answers' not; `answer.chosen` tells every window.  Refused while a
        turn runs in the session (the model is reading the transcript)."""
        sid, turn_id = params.session_id, params.turn_id

        def job(tx: Tx) -> p.ChooseResult:
            _must_exist(tx, sid)
            if sessions.status(tx, sid) in TURN_RUNS:
                raise SessionBusy(BUSY)
            prompt = answers.prompt_of_turn(tx, sid, turn_id)
            ex = answers.exchange(tx, sid, prompt) if prompt is not None else None
            if ex is None or turn_id not in ex.turns:
                raise InvalidParams("turn_id", "no answer to a prompt of this session has that "
                                    "turn_id")
            if ex.shown != turn_id:
                answers.show(tx, sid, ex, turn_id)
                wire.emit(tx, sid, p.AnswerChosen(message_id=ex.prompt.message_id, turn_id=turn_id))
            return p.ChooseResult(message_id=ex.prompt.message_id, turn_id=turn_id,
                                  turn_ids=ex.turns)

        return await self.db.write(job)

    # --- branches --------------------------------------------------------------------

    def ask(self, principal: str, params: p.SessionForkParams) -> ForkAsk:
        """The fork's checked params; `branch_id` is known before anything is written, so the
        caller can follow the branch first and miss nothing of it."""
        try:
            at = message_rowid(params.message_id)
        except ValueError:
            raise InvalidParams("message_id", f"{params.message_id!r} is not a message_id") from None
        text = prompt_text(params.text) if params.text is not None else None
        key = "\0".join((principal, params.session_id, params.request_id)).encode()
        branch_id = BRANCH_PREFIX + hashlib.sha256(key).hexdigest()[:24]
        return ForkAsk(params.session_id, at, branch_id, params.request_id, text,
                       params.restore_files)

    async def fork(self, principal: str, ask: ForkAsk) -> p.ForkResult:
        """A branch at the prompt: a new session holding the rows before it (store/branches.py),
        linked to it, with `text` admitted as its first turn, in one commit; `session.created`
        and the original's `session.forked` tell every window.  The same request again
        answers with that branch (`duplicate`), running nothing.  With `restore_files`, the
        folder's files are first put back as they were at the prompt (the original's later
        turns marked undone), which a running turn in the original refuses."""
        found = await self.db.read(lambda tx: self._check(tx, principal, ask))
        if found is not None:
            return found
        restored: list[str] = []
        if ask.restore_files:
            restored = await self.checkpoints.rewind(ask.session_id, ask.at)

        def job(tx: Tx) -> tuple[p.ForkResult, Claim | None]:
            again = self._check(tx, principal, ask)
            if again is not None:
                return again, None
            original = sessions.row(tx, ask.session_id)
            assert original is not None  # (checked just now, in this transaction)
            branches.insert(tx, ask.branch_id, original, _title(original), ask.at)
            branches.copy_history(tx, ask.session_id, ask.branch_id, ask.at)
            summary = sessions.get(tx, ask.branch_id)
            assert summary is not None
            session = wire.session(summary)
            wire.broadcast(tx, ask.branch_id, p.SessionCreated(session=session))
            wire.emit(tx, ask.session_id, p.SessionForked(message_id=_mid(ask.at), branch=session))
            receipt: p.Receipt | None = None
            claim: Claim | None = None
            if ask.text is not None:
                receipt, claim = self.authority.admit_internal(
                    tx, principal, ask.branch_id, ask.request_id, Payload(text=ask.text))
            return p.ForkResult(session=session, receipt=receipt, restored=restored), claim

        result, claim = await self.db.write(job)
        if result.receipt is not None and not result.duplicate:
            self.authority.admitted(result.receipt, claim)
        return result

    def _check(self, tx: Tx, principal: str, ask: ForkAsk) -> p.ForkResult | None:
        """The branch this request made already (a duplicate), else None once the fork is
        known to be possible: -32004 for an unknown session, -32602 for a message that is not
        one of its prompts, -32010 for the request_id used for another fork."""
        existing = sessions.row(tx, ask.branch_id)
        if existing is not None:
            return _duplicate(tx, principal, ask, existing)
        original = sessions.row(tx, ask.session_id)
        if original is None:
            raise NotFound("session", ask.session_id)
        if answers.prompt_at(tx, ask.session_id, ask.at) is None:
            raise InvalidParams("message_id", "message_id must name one of the session's prompts")
        if ask.restore_files and sessions.status(tx, ask.session_id) in TURN_RUNS:
            raise SessionBusy(BUSY)
        return None


def _duplicate(tx: Tx, principal: str, ask: ForkAsk, branch: SessionRecord) -> p.ForkResult:
    admitted = admissions.by_key(tx, principal, branch.session_id, ask.request_id)
    same = branch.forked_from == ask.session_id and branch.forked_at == _mid(ask.at) and (
        (admitted is None and ask.text is None) or (
            admitted is not None and ask.text is not None
            and admitted.payload_digest == Payload(text=ask.text).digest))
    if not same:
        raise AdmissionConflict(f"request_id {ask.request_id!r} was already used for another "
                                "fork; use a new request_id for a new branch")
    summary = sessions.get(tx, branch.session_id)
    assert summary is not None
    receipt = wire.receipt(admissions.receipt(tx, admitted, duplicate=True)) \
        if admitted is not None else None
    return p.ForkResult(session=wire.session(summary), duplicate=True, receipt=receipt)


def _must_exist(tx: Tx, session_id: str) -> None:
    if not sessions.exists(tx, session_id):
        raise NotFound("session", session_id)


def _mid(rowid: int) -> str:
    return message_id(rowid)


def _title(original: SessionRecord) -> str:
    """A branch's title: the original's, marked as a branch once."""
    title = original.title
    return title if title.startswith("Branch · ") else f"Branch · {title}"[:p.TITLE_MAX]
