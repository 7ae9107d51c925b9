"""What a delegate call's card says about its sub-agent: its state in words, its task, its answer.

No Qt here: `desktop/qt/delegate_card.py` lays these out.  The words come from the
card's status (the call's), its live output (where the backend says the sub-agent
waits for a slot or an approval) and its result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from desktop.state.transcript import Item, ToolItem

DELEGATE = "delegate"
WAITING_SLOT = "Waiting for a free sub-agent slot"  # the backend's live words (authority/delegate.py)
WAITING_APPROVAL = "waiting for an approval"


@dataclass(frozen=True)
class ChildState:
    """`words` for people, `tone` a theme colour name, `done` once the call has ended."""

    words: str
    tone: str
    done: bool


def is_delegate(item: ToolItem) -> bool:
    return item.name == DELEGATE


def unnamed_children(items: Iterable[Item]) -> bool:
    """Whether a delegate card does not know its sub-agent's session yet."""
    return any(isinstance(it, ToolItem) and is_delegate(it) and it.child_session_id is None
               and it.status not in ("denied", "skipped", "error") for it in items)


def child_state(item: ToolItem) -> ChildState:
    """The sub-agent's state as the card shows it."""
    status = item.status
    if status == "ok":
        return ChildState("Its answer:", "success", True)
    if status == "error":
        return ChildState("It ended without an answer:", "danger", True)
    if status == "interrupted":
        return ChildState("Stopped with this turn.", "warning", True)
    if status == "unknown":
        return ChildState("Turnkey stopped while it worked; its outcome is unknown.", "warning", True)
    if status in ("skipped", "denied"):
        return ChildState("It never started.", "muted", True)
    last = _last_line(item.progress)
    if WAITING_APPROVAL in last:
        return ChildState("Waiting for your approval in its session.", "warning", False)
    if WAITING_SLOT in last:
        return ChildState("Waiting for a free slot: other sub-agents are working.", "muted", False)
    if item.child_session_id is None:
        return ChildState("Starting…", "muted", False)
    return ChildState("Working in its own session…", "accent", False)


def task_of(item: ToolItem) -> str:
    task = item.arguments.get("task")
    return task.strip() if isinstance(task, str) else ""


def context_of(item: ToolItem) -> str:
    context = item.arguments.get("context")
    return context.strip() if isinstance(context, str) else ""


def answer_of(item: ToolItem) -> str:
    """The sub-agent's answer (or, when it ended without one, what the call said instead)."""
    return item.output.strip() if item.status in ("ok", "error", "interrupted", "unknown") else ""


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
