"""Questions the model asks the person (the `clarify` tool) as the app shows them.  Qt-free.

A question reaches a client twice: its session's log copy (with a seq, for the window that
shows the session) and the broadcast copy (for the tray and notifications), in either order
after a reconnection.  `Pending` keeps the ones waiting by `question_id` and remembers the
ones that closed, so a late copy of a question's `clarify.request` never brings back a card
that was already answered.  The rest is words: a notification's, the tray's, the tool card's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared import protocol as p

# A turn waits for the person: for an approval or for the answer to a question.
WAITING = frozenset({"waiting_approval", "waiting_answer"})
SHORTCUTS = 9  # choices 1–9 have a key on the card
NOTIFY_CHOICES = 3  # a notification's buttons: this many choices (servers show few), then Open
MENU_CHOICES = 9  # the tray's entry for a question: its choices, up to this many


@dataclass
class Pending:
    """The questions waiting, by `question_id`, oldest first."""

    waiting: dict[str, p.Question] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)

    def load(self, questions: Iterable[p.Question]) -> None:
        """A snapshot (`pending_questions`, `clarify.list`) is the new truth."""
        self.waiting = {q.question_id: q for q in questions if q.status == "pending"}
        self.closed -= set(self.waiting)  # (asked again? never: ids are new; but the list wins)

    def apply(self, data: p.QuestionEvent) -> bool:
        """A `clarify.request` or `clarify.resolved`; True when it changed what waits."""
        q = data.question
        if isinstance(data, p.QuestionResolved) or q.status != "pending":
            self.closed.add(q.question_id)
            return self.waiting.pop(q.question_id, None) is not None
        if q.question_id in self.closed or q.question_id in self.waiting:
            return False  # the other copy of a question already taken, or already closed
        self.waiting[q.question_id] = q
        return True

    def drop(self, question_id: str) -> None:
        """Answered elsewhere or expired (the backend said -32014): it no longer waits."""
        self.closed.add(question_id)
        self.waiting.pop(question_id, None)


def takes_words(q: p.Question) -> bool:
    """Whether the card has a text field: no choices, or choices and the person's own words."""
    return not q.choices or q.allow_other


def choice_of_key(q: p.Question, digit: int) -> int | None:
    """The choice the key `digit` (1–9) picks on the card, if there is one."""
    if 1 <= digit <= min(SHORTCUTS, len(q.choices)):
        return digit - 1
    return None


def typed_answer(q: p.Question, text: str) -> str | None:
    """What the text field sends: its words trimmed, up to MAX_ANSWER; None when there is
    nothing to send or the question takes no words."""
    words = text.strip()
    if not words or not takes_words(q):
        return None
    return words[:p.MAX_ANSWER]


def one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def notification_words(q: p.Question, title: str = "", on: str = "") -> tuple[str, str]:
    """A question in a notification: its title and text (the question, the session's name)."""
    where = f"\n— {title}" if title else ""
    return f"Turnkey has a question for you{on}", f"{q.question}{where}"


def menu_words(q: p.Question) -> str:
    """A question's entry in the tray's menu."""
    return f"Answer? {one_line(q.question, 60)}"


def notification_actions(q: p.Question) -> list[tuple[str, str]]:
    """A notification's buttons: the first few choices (`choice:N`), then Open (for the
    others, or for words)."""
    shown = [(f"choice:{i}", one_line(c, 40)) for i, c in enumerate(q.choices[:NOTIFY_CHOICES])]
    return [*shown, ("open", "Open")]


def action_choice(action: str) -> int | None:
    """The choice a notification's button `choice:N` picks; None for any other action."""
    head, _, index = action.partition(":")
    return int(index) if head == "choice" and index.isdigit() else None


# --- the tool card in the transcript ---------------------------------------------------

ANSWERED = "The person answered"


def answer_of_result(arguments: dict[str, Any], meta: dict[str, Any], output: str) -> str | None:
    """The answer a finished `clarify` call returned, in the person's terms: the chosen
    choice (by its index in `meta`), else their words (after the result's "The person
    answered: "), else None when nobody answered or the call failed."""
    if meta.get("question_status") != "answered":
        return None
    choices = arguments.get("choices")
    index = meta.get("choice")
    if isinstance(index, int) and isinstance(choices, list) and 0 <= index < len(choices):
        return str(choices[index]).strip()
    head = f"{ANSWERED}: "
    return output[len(head):] if output.startswith(head) else None


def outcome_words(q: p.Question) -> str:
    """How a question closed, for its tool card: "Answered: blue." and the like."""
    if q.status == "answered":
        return f"Answered: {q.answer}"
    if q.status == "expired":
        return "Nobody answered in time."
    return "Withdrawn: the turn stopped before it was answered."
