"""What the latest turn of a conversation offers: Retry when it failed or was stopped (its
prompt answered again in place; another provider when its provider failed it), Regenerate when
it answered, Undo when it changed files (and no window has undone them), and "thinking" while
the model has said nothing yet.  Qt-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from desktop.state.answers import is_prompt, visible
from desktop.state.items import AssistantItem, Item, NoteItem, ToolItem, UserItem

RETRY_NOTES = frozenset({"failed", "interrupted"})  # a turn that ended without its answer


@dataclass(frozen=True)
class TurnActions:
    thinking: bool = False  # running, and nothing said or called yet
    retry_text: str | None = None  # the prompt answered again by Retry (its turn did not finish)
    provider_failed: bool = False  # the provider failed the turn: another one may answer it
    undo_turn: str | None = None  # the turn whose file changes can be undone
    files_changed: int = 0  # how many calls of that turn changed a file
    # The last prompt's answer can be regenerated (session.regenerate): it has one and nothing
    # runs; `prompt_key` is the prompt's message_id once its row is stored.
    regenerate: bool = False
    prompt_key: str | None = None


def latest(items: Sequence[Item], status: str, undone: frozenset[str] = frozenset()) -> TurnActions:
    """The actions for the last prompt's turn (`status` is the session's): its shown answer
    only (state/answers.py)."""
    shown = visible(items)
    start = next((i for i in range(len(shown) - 1, -1, -1) if is_prompt(shown[i])), None)
    if start is None:
        return TurnActions()
    prompt = shown[start]
    assert isinstance(prompt, UserItem)
    after = shown[start + 1:]
    if status in ("running", "waiting_approval", "waiting_answer"):
        said = any((isinstance(it, AssistantItem) and it.text.strip()) or isinstance(it, ToolItem)
                   for it in after)
        return TurnActions(thinking=status == "running" and not said)
    if status == "queued":
        return TurnActions()
    retry, provider_failed = None, False
    if after and isinstance(after[-1], NoteItem) and after[-1].kind in RETRY_NOTES:
        retry = prompt.text
        provider_failed = after[-1].kind == "failed" and bool(after[-1].failure_kind)
    # A call whose change was put back (by any window: files.restored) offers no undo again.
    changed = [it for it in after
               if isinstance(it, ToolItem) and it.diff and it.status == "ok" and not it.undone]
    turn = changed[0].turn_id if changed else None  # the shown answer's turn
    undo = turn if turn is not None and turn not in undone else None
    key = prompt.key if not prompt.key.startswith("prompt:") else None
    return TurnActions(retry_text=retry, provider_failed=provider_failed, undo_turn=undo,
                       files_changed=len(changed) if undo else 0, regenerate=bool(after),
                       prompt_key=key)


@dataclass(frozen=True)
class Offer:
    """What the turn bar shows for the latest turn: its words and which buttons."""

    text: str
    retry: bool
    other: bool  # Try another provider
    undo: bool


def offer(actions: TurnActions, other_providers: bool) -> Offer | None:
    """The turn bar for `actions` (`other_providers`: another provider is set up), or None
    when it offers nothing."""
    if actions.retry_text is None and actions.undo_turn is None:
        return None
    parts = []
    if actions.retry_text is not None:
        parts.append("The last turn did not finish.")
    if actions.undo_turn is not None:
        n = actions.files_changed
        who = "It" if parts else "The last turn"
        parts.append(f"{who} changed files ({n} change{'s' if n != 1 else ''}).")
    return Offer(" ".join(parts), retry=actions.retry_text is not None,
                 other=actions.provider_failed and other_providers,
                 undo=actions.undo_turn is not None)


def undo_words(restored: Sequence[str]) -> str:
    """The note after Undo file changes: the files put back, by name (five at most)."""
    if not restored:
        return "Nothing to put back: no file had changed."
    names = ", ".join(PurePath(f).name for f in restored[:5])
    more = f" and {len(restored) - 5} more" if len(restored) > 5 else ""
    return f"Put back {len(restored)} file{'s' if len(restored) != 1 else ''}: {names}{more}."
