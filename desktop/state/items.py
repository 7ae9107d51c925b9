"""The transcript's display items: a prompt, an answer's text, a tool call's card, a note.
Qt-free; `transcript.py` builds and changes them, the widgets paint them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from desktop.state.live_tail import LiveTail
from shared import protocol as p

_versions = itertools.count(1)


@dataclass(eq=False)
class Item:
    key: str
    turn_id: str | None
    version: int = field(default_factory=lambda: next(_versions), init=False)
    # A row of a prompt's answer that is not shown (state/answers.py): kept, not drawn.
    hidden: bool = field(default=False, kw_only=True)

    def bump(self) -> None:
        self.version = next(_versions)


@dataclass(eq=False)
class UserItem(Item):
    text: str = ""
    steer: bool = False  # sent into a running turn: part of its answer, not a prompt
    branches: list[str] = field(default_factory=list)  # sessions forked at this prompt
    attachments: list[p.MessageAttachment] = field(default_factory=list)  # files sent with it


@dataclass(eq=False)
class AssistantItem(Item):
    text: str = ""
    streaming: bool = False


@dataclass(eq=False)
class ToolItem(Item):
    call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    status: str = "pending"  # pending, running, waiting_approval/_answer, then a DONE_TOOL status
    progress: str = ""  # the end of its live output, as a terminal shows it (no escape sequences)
    tail: LiveTail | None = field(default=None, repr=False)  # makes `progress`; while it runs
    output: str = ""
    diff: str = ""
    duration_ms: int | None = None
    spilled_path: str | None = None
    expanded: bool = False
    # Who let it run or stopped it (meta of its result): "user", "timeout", "stopped", "rule",
    # "policy", "hook" (the person's pre_tool hook blocked it: `hook` names it); when (RFC 3339
    # UTC); the answer given; how long an unanswered ask waited.
    decided_by: str | None = None
    hook: str = ""
    decided_at: str | None = None
    decision: str | None = None
    timeout_s: float | None = None
    # A delegate call's sub-agent session (announced while it runs, kept in its result's meta).
    child_session_id: str | None = None
    # A command the sandbox stopped ("write": outside the session folder, "network"), and what
    # it ran with beyond the sandbox, as allowed, or planted (meta of a terminal result).
    sandbox_blocked: str = ""
    sandbox_note: str = ""
    # Its change to a file was put back by `session.undo` (files.restored names the call; its
    # row's meta says `undone`).
    undone: bool = False
    # A `clarify` call's question, once it closed: "Answered: …", or that nobody answered.
    outcome: str = ""


@dataclass(eq=False)
class NoteItem(Item):
    kind: str = ""
    text: str = ""
    detail: str = ""  # the raw words behind a failure (provider, HTTP status, what it said)
    expanded: bool = False  # the detail shown
    failure_kind: str = ""  # a failed note's provider-error kind: the provider failed the turn
    undone: bool = False  # a `review` note whose changes review.undo put back
