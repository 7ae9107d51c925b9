"""The chat commands (no I/O): what a message starting with `/` asks for.

They are handled by the door as they arrive, even while a turn runs (a turn waiting for
an approval is answered this way); nothing here reaches the model.  `//text` is a prompt
that starts with `/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.protocol import MAX_ANSWER, Decision, Question

Name = Literal["stop", "queue", "steer", "status", "new", "approve", "deny", "help"]
NAMES: tuple[Name, ...] = ("stop", "queue", "steer", "status", "new", "approve", "deny", "help")
HELP = (
    "Send a message to prompt the agent; while it works, messages wait their turn.\n"
    "- /stop: stop the running turn\n"
    "- /queue TEXT: run TEXT after what is running and queued\n"
    "- /steer TEXT: add TEXT to the running turn, at its next step\n"
    "- /status: what the session is doing\n"
    "- /new: start a new session in this room\n"
    "- /approve [once|session|always] or /deny: answer the approval waiting (reply to its "
    "message when several wait); or react 👍 / 👎 to it\n"
    "- a question from the agent: reply to it with a number or your answer (while it is the "
    "only one waiting, just send them)\n"
    "- //TEXT: a prompt that starts with /"
)
APPROVE_WORDS: dict[str, Decision] = {"once": "once", "session": "session", "always": "always"}
# Reactions that answer an approval message.
REACTIONS: dict[str, Decision] = {
    "👍": "once", "👍️": "once", "✅": "once", "✔️": "once",
    "👎": "deny", "👎️": "deny", "❌": "deny", "🚫": "deny",
}


@dataclass(frozen=True)
class Command:
    name: Name | str  # a name outside NAMES is an unknown command
    arg: str

    @property
    def known(self) -> bool:
        return self.name in NAMES


def parse(text: str) -> Command | None:
    """The command `text` is, or None for a prompt (`//...` included)."""
    text = text.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    head, _, rest = text[1:].partition(" ")
    head, nl, tail = head.partition("\n")  # "/queue\nTEXT" too
    arg = (tail + (" " if tail and rest else "") + rest) if nl else rest
    return Command(head.lower(), arg.strip())


def prompt_text(text: str) -> str:
    """A prompt's text: `//x` is sent as `/x`."""
    stripped = text.lstrip()
    return stripped[1:] if stripped.startswith("//") else text


def approval_answer(arg: str) -> tuple[Decision, str | None] | str:
    """`/approve`'s argument: (decision, an approval id or None), or a message saying what is
    wrong.  Words: once (default), session, always; an id (`apr_...`) picks the approval."""
    decision: Decision = "once"
    chosen: str | None = None
    for word in arg.split():
        low = word.lower()
        if low in APPROVE_WORDS:
            decision = APPROVE_WORDS[low]
        elif low.startswith("apr"):
            chosen = word
        else:
            return f"/approve takes once, session or always (and optionally an approval id), not {word!r}"
    return decision, chosen


def question_answer(question: Question, text: str) -> tuple[int | None, str | None] | None:
    """(choice, answer) for clarify.respond from a message's text: a choice's number (from
    1), or the words where the question takes words; None when the text is neither."""
    words = text.strip()
    if words.isdigit() and 1 <= int(words) <= len(question.choices):
        return int(words) - 1, None
    if words and question.allow_other:
        return None, words[:MAX_ANSWER]
    return None
