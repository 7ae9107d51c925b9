"""The changes panel without Qt: a session's file changes by turn (`session.changes`), the file
chosen, what each row says, which events make the listing stale, and how a file is opened.

Turns are shown newest first (the running turn's live edits at the top), each followed by
its files; the chosen file is kept by (turn, path) across reloads.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from shared import protocol as p


@dataclass(frozen=True)
class Row:
    """One line of the panel: a turn's heading (`file` None) or one of its files."""

    turn: p.TurnChanges
    file: p.FileChange | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.turn.turn_id, self.file.path if self.file is not None else "")


def counts(diff: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff (its file headers not counted)."""
    lines = diff.splitlines()
    adds = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    dels = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    return adds, dels


def file_marks(f: p.FileChange) -> list[str]:
    """What else is true of a file's change, in words: "new", "deleted", "undone"."""
    marks = []
    if f.created and not f.deleted:
        marks.append("new")
    if f.deleted and not f.created:
        marks.append("deleted")
    if f.restored:
        marks.append("undone")
    return marks


def file_words(f: p.FileChange) -> str:
    """A file's row as a screen reader says it: "src/app.py, +3 −1, new"."""
    adds, dels = counts(f.diff)
    return ", ".join([f.label, f"+{adds} −{dels}", *file_marks(f)])


def turn_words(turn: p.TurnChanges, now: datetime | None = None) -> str:
    """A turn's heading: its prompt and when (the time today, else the date too)."""
    when = ""
    try:
        at = datetime.fromisoformat(turn.at.replace("Z", "+00:00")).astimezone()
    except ValueError:
        at = None
    if at is not None:
        today = (now or datetime.now(at.tzinfo)).date() == at.date()
        when = at.strftime("%H:%M") if today else at.strftime("%d %b %H:%M")
    prompt = turn.prompt or "(no prompt)"
    return f"{when} · {prompt}" if when else prompt


def editor_command(path: str, env: Mapping[str, str]) -> list[str] | None:
    """The command that opens `path` in the person's editor: `$VISUAL` (its words, then the
    path) when set, else None: the system's default application opens it."""
    visual = env.get("VISUAL", "").strip()
    if not visual:
        return None
    try:
        words = shlex.split(visual)
    except ValueError:
        words = [visual]
    return [*words, path] if words else None


# Types a desktop's opener may run rather than show (a launcher, a program, an installer):
# the model wrote these files, so "open" must never mean "run".  (Scripts are text an opener
# shows in an editor; one marked executable is refused like a program.)
RUNNABLE_TYPES = frozenset({
    "application/x-desktop", "application/x-executable", "application/x-sharedlib",
    "application/x-pie-executable", "application/x-ms-dos-executable",
    "application/x-msdownload", "application/x-msi", "application/vnd.appimage",
    "application/x-iso9660-appimage", "application/java-archive", "application/x-java-archive",
    "application/x-deb", "application/vnd.debian.binary-package", "application/x-rpm",
})
NOT_RUN = ("Not opened with the system's default application: {label} could run as a program "
           "that way ({why}), and the agent wrote it. Set $VISUAL to your editor to open it "
           "there, or open it yourself.")


def default_open_refusal(label: str, mime: str, ancestors: Sequence[str],
                         executable: bool) -> str | None:
    """Why `label` (a file a turn changed) must not go to the desktop's default opener, or
    None when it may: text and images only, never a file marked executable, a launcher (a
    desktop entry, whatever it claims to be: `ancestors`, the types `mime` inherits) or a
    program (`mime` itself, as the shared MIME database names it; scripts inherit the
    executable type but are text)."""
    if executable:
        return NOT_RUN.format(label=label, why="it is marked executable")
    if mime in RUNNABLE_TYPES or "application/x-desktop" in ancestors:
        return NOT_RUN.format(label=label, why=f"its type is {mime}")
    if not any(k.startswith(("text/", "image/")) for k in (mime, *ancestors)):
        return NOT_RUN.format(label=label, why=f"its type is {mime}, not text")
    return None


def is_stale(data: object) -> bool:
    """Whether an event of the session makes the listing out of date: a call's change to a
    file landed (a live edit), files were put back, or a turn ended (a command may have
    changed a listed file since)."""
    if isinstance(data, p.ToolComplete):
        return bool((data.meta or {}).get("diff"))
    return isinstance(data, p.FilesRestored | p.MessageComplete)


class ChangesModel:
    """What the panel shows for one session."""

    def __init__(self, session_id: str = "") -> None:
        self.session_id = session_id
        self.turns: list[p.TurnChanges] = []  # newest first
        self.has_more = False
        self.loaded = False
        self.chosen: tuple[str, str] | None = None  # (turn_id, path) of the file shown

    def follow(self, session_id: str) -> None:
        """Another session (the window shows another, or compression moved this one on)."""
        if session_id != self.session_id:
            self.session_id = session_id
            self.turns, self.has_more, self.loaded, self.chosen = [], False, False, None

    def load(self, result: p.ChangesResult) -> None:
        """A fresh listing; the file shown stays chosen while it is listed, else the newest."""
        self.turns = list(reversed(result.turns))
        self.has_more = result.has_more
        self.loaded = True
        keys = {r.key for r in self.rows() if r.file is not None}
        if self.chosen not in keys:
            first = next((r for r in self.rows() if r.file is not None), None)
            self.chosen = first.key if first is not None else None

    def rows(self) -> list[Row]:
        out: list[Row] = []
        for turn in self.turns:
            out.append(Row(turn))
            out.extend(Row(turn, f) for f in turn.files)
        return out

    def choose(self, key: tuple[str, str]) -> None:
        if key[1]:
            self.chosen = key

    def current(self) -> Row | None:
        """The file shown, with its turn."""
        return next((r for r in self.rows() if r.file is not None and r.key == self.chosen), None)

    def can_undo(self, busy: bool) -> bool:
        """Undo this file: a file not put back yet, while no turn runs (the backend refuses)."""
        row = self.current()
        return row is not None and row.file is not None and not row.file.restored and not busy

    def can_open(self, remote: bool) -> bool:
        """Open in editor: a file on this computer that is there to open."""
        row = self.current()
        if remote or row is None or row.file is None:
            return False
        f = row.file
        gone = f.deleted if not f.restored else f.created  # put back: as before the turn
        return not gone

    def file_count(self) -> int:
        return sum(len(t.files) for t in self.turns)

    def summary(self) -> str:
        """The panel's heading line: how many files in how many turns."""
        if not self.loaded:
            return "Loading…"
        if not self.turns:
            return "No file changed in this session yet."
        n, t = self.file_count(), len(self.turns)
        more = " (older turns not shown)" if self.has_more else ""
        return f"{n} file{'s' if n != 1 else ''} changed in {t} turn{'s' if t != 1 else ''}{more}"
