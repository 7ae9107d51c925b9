"""Questions back to the person: the `clarify` tool's question, clarify.* params, results, events.

A question waits like an approval (the call waits, `clarify.timeout_s`, then the model is told
nobody answered), but it outlives a crash: a question still pending when the backend stops
keeps waiting until it expires, and an answer given then is admitted as a prompt of its own
(`followup_admission_id`), so the model reads it in the session's next turn.  A turn that
ends otherwise while its question waits (interrupted) withdraws it (`cancelled`).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.literals import QuestionStatus
from shared.protocol.base import EventData, EventSpec, Id, Params, Wire

MAX_QUESTION = 2000  # characters of a question
MAX_CHOICES = 10
MAX_CHOICE = 200  # characters of one choice
MAX_ANSWER = 4000  # characters of a free-text answer


class Question(Wire):
    question_id: str
    session_id: str
    turn_id: str
    call_id: str
    question: str
    choices: list[str]  # empty: the person answers in their own words
    allow_other: bool  # with choices: a free-text answer is taken too (always true without)
    status: QuestionStatus
    created_at: str
    expires_at: str
    answer: str | None = None  # the chosen choice's text or the person's words
    choice: int | None = None  # the chosen choice's index; None for a free-text answer
    answered_at: str | None = None  # when it stopped being pending
    answered_by: str | None = None  # "user", "timeout" or "stopped" (absent while pending)
    # The prompt an answer to a question whose turn had already ended became.
    followup_admission_id: str | None = None


class ClarifyListParams(Params):
    session_id: Id | None = None


class ClarifyRespondParams(Params):
    """Exactly one of `choice` (an index into the question's choices) and `answer` (the
    person's words, taken only when the question allows them)."""

    question_id: Id
    choice: Annotated[int, msgspec.Meta(ge=0, lt=MAX_CHOICES)] | None = None
    answer: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ANSWER)] | None = None


class QuestionsResult(Wire):
    questions: list[Question]


class QuestionResult(Wire):
    question: Question


class QuestionEvent(EventData):
    question: Question


class QuestionAsked(QuestionEvent):
    """`clarify.request`: the model asks the person a question and waits for the answer."""


class QuestionResolved(QuestionEvent):
    """`clarify.resolved`: the question was answered, expired or cancelled."""


CLARIFY_EVENTS = (
    EventSpec("clarify.request", QuestionAsked, "`question`"),
    EventSpec("clarify.resolved", QuestionResolved, "`question`"),
)
