"""A conversation's words without Qt: its header (the title, then where it runs: backend, folder,
model, chat rooms), its status chip's tone, the connection note, a branch's banner, the new
session's welcome, and which of your messages Ctrl+E edits.

`Conversation` in `desktop/qt/conversation.py` and its parts show them.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from desktop.state.answers import is_prompt
from desktop.state.first_run import Readiness, needs_words, offline_words, readiness
from desktop.state.items import Item, UserItem
from desktop.state.model_choices import current
from desktop.state.sessions import home_relative
from shared import protocol as p

STATUS_TONES = {"running": "accent", "queued": "accent", "waiting_approval": "warning",
                "waiting_answer": "warning",                 "unknown": "warning"}


def status_tone(status: str) -> str:
    """The status chip's theme tone."""
    return STATUS_TONES.get(status, "muted")


def where(session: p.Session | None, backend: str, rooms: Iterable[str]) -> str:
    """The header's second line: the backend (a remote one's name), the folder (a remote
    backend's path as it is, this computer's from home), the model and the chat rooms."""
    folder = (session.cwd if backend else home_relative(session.cwd)) if session else ""
    model = session.model if session else ""
    return " · ".join(x for x in (f"on {backend}" if backend else "", folder, model, *rooms) if x)


def connection_words(state: str) -> str:
    """The header's note while the link is not connected ("" when it is)."""
    return "" if state == "connected" else f"⟳ {state}…"


def branch_words(session: p.Session | None, original_title: str | None) -> str | None:
    """A branch's banner (rich text), with a link to the original unless it was deleted
    (`original_title` ""; None while it is not read yet); None for a session not branched."""
    if session is None or not session.forked_from:
        return None
    title = original_title
    named = f"“{html.escape(title, quote=False)}”" if title else (
        "a session deleted since" if title == "" else "another session")
    link = "" if title == "" else " — <a href='original'>open the original</a>"
    return f"Branched from {named} at an earlier message{link}."


def answering(session: p.Session | None, providers: Sequence[p.ProviderChoice],
              summary: p.ProviderSummary | None) -> tuple[str, str]:
    """The model that answers a new session and its provider's name ("" when unknown): the
    session's own, else the default one listed (a session made before any provider was set up
    has no model of its own), else the one `initialize` said turns use."""
    now = current(session, providers)
    default = next((c for c in providers if c.default), None)
    chosen = (now.model, now.provider) if now else (
        (default.model, default.name) if default is not None else ("", ""))
    model = chosen[0] or (summary.model if summary is not None else "") or "the configured model"
    name = chosen[1] or (summary.name if summary is not None else "") or ""
    return model, name


def welcome(session: p.Session | None, providers: Sequence[p.ProviderChoice],
            summary: p.ProviderSummary | None, *, text: str, muted: str, warning: str,
            ready: Readiness | None = None) -> str:
    """A new session's welcome (rich text, in the theme's `text`, `muted` and `warning`
    colours): what it can do, in which folder, which model answers it; when only the built-in
    offline model is set up, that it runs here and is weak at real work; when nothing can
    answer, that a provider is needed.  Both offer the provider form (`first_run.ADD_PROVIDER`).
    `ready`: `first_run.readiness` (None: from `summary` alone)."""
    folder = home_relative(session.cwd) if session else "this folder"
    ready = ready or readiness(summary, None)
    intro = (f"<p style='font-size:15pt; font-weight:600; color:{text}'>New session</p>"
             f"<p style='color:{muted}'>Ask Turnkey to read, change and run things in "
             f"<b>{html.escape(folder, quote=False)}</b>. It asks you before anything outside the "
             f"folder or risky, and every change can be undone.</p>")
    if ready == "needs_provider":
        return intro + needs_words(warning)
    model, name = answering(session, providers, summary)
    who = html.escape(model, quote=False) + (f" ({html.escape(name, quote=False)})" if name else "")
    note = offline_words(model, warning) if ready == "offline" else ""
    return f"{intro}<p style='color:{muted}'>Answering: {who}</p>{note}"


def editable(item: Any) -> bool:
    """A message of yours that can be edited into a branch: a prompt whose row is stored."""
    return is_prompt(item) and not item.hidden and not item.key.startswith("prompt:")


def edit_target(items: Sequence[Item], row: int | None, current_row: int | None) -> UserItem | None:
    """The message Ctrl+E (or a message's Edit and branch…) edits: the one at `row`, else the
    current row's if it is one of yours, else your last."""
    rows = [r for r in (row, current_row) if r is not None]
    rows += range(len(items) - 1, -1, -1)
    target = next((items[r] for r in rows if 0 <= r < len(items) and editable(items[r])), None)
    return target if isinstance(target, UserItem) else None


def message_key(message_id: str, messages: Iterable[p.Message]) -> str | None:
    """The transcript key of a stored message (a tool result's is its call's card)."""
    for m in messages:
        if m.message_id == message_id:
            return f"call:{m.call_id}" if m.role == "tool" and m.call_id else m.message_id
    return None
