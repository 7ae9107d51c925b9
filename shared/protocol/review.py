"""The background review (addition): after a person's turn the auxiliary model may update
memory and the person's skills; what it changed is one `review` note, which `review.undo`
takes back (backend/turn/review.py, backend/authority/reviews.py)."""

from __future__ import annotations

from typing import Literal

from shared.protocol.base import EventData, EventSpec, Id, Params, Wire
from shared.protocol.sessions import Message

ReviewChangeKind = Literal["memory", "skill"]


class ReviewChange(Wire):
    """One thing a review changed: a notebook (`target` user or environment) or a skill of
    the person's folder (`target` its name); `action` is what the model asked (add, replace,
    remove; create, update)."""

    kind: ReviewChangeKind
    target: str
    action: str
    text: str  # the entry, or the skill's description, as people read it (cut short)


class ReviewUndoParams(Params):
    session_id: Id
    message_id: Id  # the `review` note's


class ReviewUndoResult(Wire):
    """`undone`: true once the note's changes are put back (also when they already were)."""

    message_id: str
    undone: bool


class ReviewNoted(EventData):
    """Addition: a background review changed memory or skills; `message` is its `review`
    note, already stored (a session's note, no turn)."""

    message: Message


class ReviewUndone(EventData):
    """Addition: the review note `message_id` was undone (`review.undo`): its meta now has
    `undone: true`."""

    message_id: str


REVIEW_EVENTS = (
    EventSpec("review.noted", ReviewNoted,
              "addition: `message` (the `review` note: `meta.changes`, a list of "
              "ReviewChange), after a background review changed memory or skills"),
    EventSpec("review.undone", ReviewUndone,
              "addition: `message_id` of a `review` note whose changes `review.undo` put back"),
)
