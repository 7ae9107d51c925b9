"""The message box without Qt: what a keypress in it does, what its buttons say while a turn
runs or not, when a long message warns, and where a quote goes.

`Composer` and `ComposerPanel` in `desktop/qt/composer.py` show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from desktop.state.copying import quoted

IDLE_HINT = "Message Turnkey…  (Enter sends · Shift+Enter new line · Esc stops)"
RUNNING_HINT = "Steer the running turn (Alt+Enter) or queue a message for after it (Enter)…"
LONG_MESSAGE_TOKENS = 8_000  # a message box text over this (estimated) warns: it is resent every turn
# A turn runs (or waits for the person): Steer joins it, Send queues.
RUNNING = frozenset({"running", "waiting_approval", "waiting_answer"})

Intent = Literal["send", "steer"]


def key_action(enter: bool, shift: bool, alt: bool) -> Intent | None:
    """What a keypress in the message box does: Enter sends, Alt+Enter steers, Shift+Enter
    (and every other key) is typing (None)."""
    if not enter or shift:
        return None
    return "steer" if alt else "send"


@dataclass(frozen=True)
class ComposerMode:
    """The buttons under the message box and its hint, for the session's status."""

    steering: bool  # a turn runs: Steer is shown and Send queues
    send_text: str
    send_icon: str  # a theme icon's name
    send_tip: str
    placeholder: str


def mode(status: str) -> ComposerMode:
    if status in RUNNING:
        return ComposerMode(True, "Queue", "queue", "Send after the running turn (Enter)",
                            RUNNING_HINT)
    return ComposerMode(False, "Send", "send", "", IDLE_HINT)


def stop_enabled(busy: bool) -> bool:
    """Stop takes a click while the session has a turn running or queued."""
    return busy


def long_note(characters: int) -> str | None:
    """The warning under a long message (every later turn sends it again, so its cost repeats),
    or None; the tokens are estimated from the characters, cheaply."""
    tokens = characters // 4
    if tokens <= LONG_MESSAGE_TOKENS:
        return None
    return f"Long message: about {tokens:,} tokens, sent with every turn from now on"


def quote_after(before: str, text: str) -> str:
    """What Quote in reply adds at the end of the message box holding `before`: `text` as
    "> " lines, a blank line after what is there, and an empty line to type on."""
    newlines = len(before) - len(before.rstrip("\n"))
    gap = "\n" * max(0, 2 - newlines) if before.strip() else ""
    return f"{gap}{quoted(text)}\n\n"
