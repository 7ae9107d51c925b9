"""What the door says in a room (no I/O): a turn's reply as it streams and when it ends,
approval requests and their outcome, refusals and command answers.

A turn has one reply message, edited as the turn goes.  While it runs it is the answer
so far plus a status line (the tool running, how many ran, an approval waiting); its
last edit is the turn's final text exactly (`message.complete.text`), followed only by a
line saying why when the turn did not complete.  Text longer than a chat message can
hold is cut with a note saying where to read the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.authority.recovery import RECOVERED_NOTE
from shared.protocol import Approval, Question, Receipt

# Characters of answer text in one message: Matrix refuses an event over 64 KiB, and an
# edit carries its text twice, as plain text and as HTML.
MAX_TEXT = 12_000
SUMMARY_MAX = 300  # characters of a tool call's summary in a status line

REFUSAL = (
    "Sorry, I only take messages from the people my owner allowed, so I did not act on "
    "yours. If you should have access, ask the owner to add your user id to "
    "`allowed_users` in the `[doors.matrix]` settings."
)

GREETING = (
    "Hi, I'm your Turnkey agent. Send a message here and I'll work on it in a session of "
    "its own (you'll find it in the Turnkey app too); `/help` lists what else I understand."
)
ENCRYPTED = (
    "This room is end-to-end encrypted, and I cannot read encrypted messages. Talk to me in "
    "a room without encryption (create it with encryption off)."
)

TAKEN = "images (PNG, JPEG, GIF, WebP), PDFs and text files"


def file_refused(name: str, why: str) -> str:
    """Why a file sent in the room was not taken (nothing ran)."""
    return f"I did not take **{name}**: {why}. Nothing was sent to the model."


@dataclass
class Draft:
    """What the reply of one running turn shows besides its text."""

    tool: str | None = None  # the call running now: "name: summary"
    tools_done: int = 0
    waiting_approval: bool = False
    waiting_answer: bool = False  # a clarify question waits
    steered: int = 0
    extra: list[str] = field(default_factory=list)

    def status(self) -> str:
        if self.waiting_approval:
            line = "⏸ waiting for your approval (see below)"
        elif self.waiting_answer:
            line = "⏸ waiting for your answer (see below)"
        elif self.tool is not None:
            line = f"⚙ {self.tool}"
        else:
            line = "… working"
        if self.tools_done:
            line += f" · {self.tools_done} tool call{'s' if self.tools_done != 1 else ''} done"
        return line


def running(text: str, draft: Draft) -> str:
    """The reply while its turn runs: the answer so far and, last, the status in italics."""
    body = clip(text)
    return f"{body}\n\n_{draft.status()}_" if body else f"_{draft.status()}_"


def final(receipt: Receipt, streamed: str) -> str:
    """The reply's last text: the turn's final text exactly, then why it is not complete
    when it is not.  `streamed`: what was streamed, for a turn whose end carries no text."""
    text = receipt.final_text if receipt.final_text is not None else streamed
    if receipt.status == "unknown":
        why = receipt.failure_reason or RECOVERED_NOTE
        return _with_note(text, f"⚠ {why}")
    outcome = receipt.outcome
    if outcome == "completed":
        return clip(text) if text else "_(the turn ended without an answer)_"
    if outcome == "interrupted":
        return _with_note(text, "⏹ Stopped.")
    if outcome == "failed":
        return _with_note(text, f"⚠ Failed: {receipt.failure_reason or 'see the session in Turnkey'}")
    if outcome == "rejected":
        return _with_note("", f"⚠ Not run: {receipt.failure_reason or 'the backend refused it'}")
    return _with_note(text, "Cancelled before it ran.")


def _with_note(text: str, note: str) -> str:
    body = clip(text)
    return f"{body}\n\n{note}" if body else note


def clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    rest = len(text) - MAX_TEXT
    return (f"{text[:MAX_TEXT]}\n\n… ({rest:,} more characters: open the session in Turnkey "
            "to read the whole answer)")


def tool_line(name: str, summary: str) -> str:
    summary = " ".join(summary.split())
    if len(summary) > SUMMARY_MAX:
        summary = summary[: SUMMARY_MAX - 1] + "…"
    summary = summary.replace("`", "'")
    return f"{name}: `{summary}`" if summary else name


def approval_request(approval: Approval) -> str:
    summary = approval.summary if len(approval.summary) <= 2000 else approval.summary[:2000] + "…"
    summary = summary.replace("```", "'''")  # the model's text cannot close our code block
    return (
        f"**Approval needed** for {approval.tool}:\n\n```\n{summary}\n```\n\n"
        f"{approval.reason}\n\n"
        "Answer with `/approve` (once), `/approve session`, `/approve always` or `/deny`, "
        "or react 👍 / 👎 to this message."
    )


_OUTCOMES = {
    "once": "✅ Approved once", "session": "✅ Approved for this session",
    "always": "✅ Approved always", "deny": "🚫 Denied",
}


def approval_closed(approval: Approval) -> str:
    if approval.status == "expired":
        outcome = "⌛ Expired: nobody answered in time" if approval.decided_by == "timeout" \
            else "⌛ Closed: its turn stopped"
    else:
        outcome = _OUTCOMES.get(approval.decision or "", approval.status)
    return f"~~Approval needed for {approval.tool}~~ · {outcome}\n\n`{_one_line(approval.summary)}`"


def question_request(question: Question) -> str:
    """A question in the room: its text, its numbered choices, and how to answer."""
    text = question.question if len(question.question) <= 2000 else question.question[:2000] + "…"
    lines = [f"**Question:** {text}"]
    if question.choices:
        lines.append("")
        lines.extend(f"{i}. {_one_line(choice)}" for i, choice in enumerate(question.choices, 1))
        how = "Reply with a number or your answer." if question.allow_other \
            else "Reply with a number."
    else:
        how = "Reply with your answer."
    lines += ["", how]
    return "\n".join(lines)


def question_closed(question: Question) -> str:
    """The question's message once it stopped waiting: what was answered, or why not."""
    if question.status == "answered":
        picked = f"{question.choice + 1}. " if question.choice is not None else ""
        outcome = f"✅ Answered: {picked}{_one_line(question.answer or '')}"
    elif question.status == "expired":
        outcome = "⌛ Expired: nobody answered in time"
    else:
        outcome = "⌛ Withdrawn: its turn stopped"
    return f"~~Question: {_one_line(question.question)}~~ · {outcome}"


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"
