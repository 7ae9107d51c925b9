"""The Memory page's state, without Qt: one notebook's saved text, the person's draft, and what
to do when the backend says the notebook changed (`memory.changed`) while they type.

The rule the page keeps: a person's unsaved typing is never replaced.  A change from
elsewhere (the agent's memory tool, another window, `turnkey memory set`) replaces the editor's
text only when the editor holds exactly what was saved; otherwise the change is kept aside and
a notice says so, and Revert shows it.  While a save is in flight, changes that arrive are held
and looked at once the save answered: the backend sends our own save back as an event too,
possibly before the answer, and that one is not news.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared import protocol as p

TITLES: dict[p.MemoryTarget, str] = {
    "user": "About you (USER.md)",
    "environment": "About your environment (ENVIRONMENT.md)",
}
HINTS: dict[p.MemoryTarget, str] = {
    "user": "What the agent learned about you: preferences, style, who you are.",
    "environment": "What the agent learned about your machines, tools, conventions and projects.",
}
INTRO = ("The agent reads these notes at the start of every turn and edits them with its memory "
         "tool. One entry per line. Keys, tokens and passwords are refused.")
CHANGED_NOTICE = ("The agent (or another window) changed these notes while you were editing. "
                  "Your text is kept: Save replaces their change, Revert shows it.")


def measure(text: str) -> int:
    """The characters the backend will count: lines' trailing blanks and blank lines dropped
    (its cleaning, backend/tools/memory.py, without the control characters it also removes)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return len("\n".join(line for line in lines if line.strip()))


def usage_words(used: int, limit: int) -> str:
    return f"{used:,} / {limit:,} characters"


@dataclass
class Notebook:
    """One notebook as the page knows it.  `saved` is the backend's text; `changed_aside`, a
    change from elsewhere not shown because the person had unsaved typing."""

    target: p.MemoryTarget
    saved: str = ""
    limit: int = 0
    changed_aside: bool = False
    saving: bool = False
    held: list[str] = field(default_factory=list)  # changes that arrived during a save

    def loaded(self, file: p.MemoryFile, draft: str) -> str | None:
        """memory.get's answer; returns the editor's new text, or None to keep the draft."""
        self.limit = file.limit
        return self.changed(file.text, draft)

    def changed(self, text: str, draft: str) -> str | None:
        """A change from the backend (memory.changed or a fresh load); returns the editor's
        new text, or None to keep the draft (a notice is then due: `changed_aside`)."""
        if self.saving:
            self.held.append(text)
            return None
        clean = draft == self.saved
        self.saved = text
        if clean or draft == text:
            self.changed_aside = False
            return None if draft == text else text
        self.changed_aside = True
        return None

    def save_started(self) -> None:
        self.saving = True
        self.held.clear()

    def save_done(self, file: p.MemoryFile | None, draft: str, sent: str) -> str | None:
        """The save's answer (None: it failed).  Returns the editor's new text: the backend's
        cleaned text when the editor still holds what was sent, else None (the person typed
        on).  Held changes other than our own then count as changes from elsewhere."""
        self.saving = False
        held, self.held = self.held, []
        shown: str | None = None
        if file is not None:
            self.limit = file.limit
            self.saved = file.text
            self.changed_aside = False
            if draft == sent and draft != file.text:
                shown = file.text
        current = shown if shown is not None else draft
        later = [t for t in held if file is None or t != file.text]
        if later:
            again = self.changed(later[-1], current)
            return again if again is not None else shown
        return shown

    def reverted(self) -> str:
        self.changed_aside = False
        return self.saved

    def dirty(self, draft: str) -> bool:
        return draft != self.saved
