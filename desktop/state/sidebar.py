"""The sessions sidebar without Qt: every backend's sessions as a flat list of rows (a header
before each group, by day or by folder, or before a search's ranked results; with several
backends, a row naming each above its own), what each row says, and what the sidebar lists,
offers and asks.

`Sidebar` in `desktop/qt/sidebar.py` shows it; each backend's `SessionRows`
(`desktop/state/sessions.py`) keeps its sessions current from the broadcasts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Generic, Protocol, TypeVar

from desktop.state.sessions import SessionRows, ago, cost, home_relative, status_label
from shared import protocol as p
from shared.client import Incoming

PAGE = 100  # sessions per session.list
GROUPINGS = (("day", "By day"), ("folder", "By folder"))
# A session's status as its dot says it (a theme colour); none for idle.
TONES = {"running": "accent", "queued": "accent", "waiting_approval": "warning",
         "waiting_answer": "warning", "unknown": "warning"}
EMPTY = "No sessions yet.\nPress Ctrl+N to start one."


class Backend(Protocol):
    """What the list needs of a backend's link (`desktop.link.Link`)."""

    @property
    def key(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def current(self) -> str: ...
    @property
    def refusal(self) -> str: ...
    @property
    def remote_host(self) -> str: ...


B = TypeVar("B", bound=Backend)


@dataclass
class Section(Generic[B]):
    """One backend's part of the list: its link and its sessions."""

    link: B
    rows: SessionRows


@dataclass(frozen=True)
class Header:
    label: str


@dataclass(frozen=True)
class BackendHeader:
    """The row naming a backend above its sessions (only while there is more than one)."""

    section: int


@dataclass(frozen=True)
class Note:
    """A muted line in a section with nothing to list ("No sessions yet")."""

    label: str


Entry = Header | BackendHeader | Note | tuple[int, int]  # (section, index into its rows)


def day_group(stamp: str, today: date | None = None) -> str:
    """Today, Yesterday, Previous 7 days, Previous 30 days, or the month ("March 2026")."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "Older"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    day = when.astimezone().date()
    today = today or datetime.now().astimezone().date()
    if day >= today:
        return "Today"
    if day == today - timedelta(days=1):
        return "Yesterday"
    if day > today - timedelta(days=7):
        return "Previous 7 days"
    if day > today - timedelta(days=30):
        return "Previous 30 days"
    return day.strftime("%B %Y")


def backend_state(link: Backend) -> tuple[str, str]:
    """A backend's connection in words and its tone: ("Connected", "success"),
    ("Reconnecting…", "warning"), ("Refused: wrong certificate", "danger")."""
    if link.current == "connected":
        return "Connected", "success"
    if link.refusal:
        return f"Refused: {link.refusal}", "danger"
    if link.current in ("connecting", "starting"):
        return "Connecting…", "muted"
    return "Reconnecting…", "warning"


def grouped(n: int, rows: SessionRows, grouping: str, today: date | None = None) -> list[Entry]:
    """One backend's (the `n`th) sessions: grouped by day or folder, or ranked search results."""
    sessions = rows.rows
    if rows.query:  # ranked by the backend: one group, in its order
        return [Header(f"{len(sessions)} result{'s' if len(sessions) != 1 else ''}"
                       f"{'+' if rows.next_cursor else ''}"),
                *((n, i) for i in range(len(sessions)))]
    out: list[Entry] = []
    if grouping == "folder":
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(sessions):  # folders in order of their latest session
            groups.setdefault(home_relative(s.cwd), []).append(i)
        for folder, members in groups.items():
            out.append(Header(folder))
            out.extend((n, i) for i in members)
        return out
    last = None
    for i, s in enumerate(sessions):
        label = day_group(s.updated_at, today)
        if label != last:
            out.append(Header(label))
            last = label
        out.append((n, i))
    return out


def empty_note(section: Section[B]) -> Note:
    """What a backend's section says when it lists no session."""
    if section.link.refusal:
        return Note("Pair again to list its sessions")
    if section.link.current != "connected":
        return Note("Its sessions show once it answers")
    if section.rows.query:
        return Note("Nothing matches")
    return Note("No sessions yet")


# --- what a row says ---------------------------------------------------------------------


def title(s: p.Session) -> str:
    return s.title or "New session"


def session_words(s: p.Session, where: str, rooms: list[str]) -> str:
    """A session's row as a screen reader reads it; `where`: the backend's title when there
    are several, else ""; `rooms`: the chat rooms bound to it, in words."""
    on = f", on {where}" if where else ""
    bound = "".join(f", {room}" for room in rooms)
    return f"{title(s)}, {status_label(s.status)}, {cost(s)}, {ago(s.updated_at)}{on}{bound}"


def session_tip(s: p.Session, rooms: list[str]) -> str:
    bound = "".join(f"\n{room}" for room in rooms)
    return f"{title(s)}\n{home_relative(s.cwd)} · {s.model}\n" \
           f"{s.message_count} messages · {cost(s)} · {ago(s.updated_at)}{bound}"


def backend_tip(link: Backend) -> str:
    where = "this computer" if not link.remote_host else link.remote_host
    return f"Sessions on {where}; their tools run there.\n{backend_state(link)[0]}"


def age_words(s: p.Session, grouping: str) -> str:
    """A session's second line when no search matched in it: its age, and (unless the list
    is grouped by folder already) its folder's name."""
    when = ago(s.updated_at)
    if grouping != "folder":
        when = f"{when} · {home_relative(s.cwd).rsplit('/', 1)[-1] or '/'}"
    return when


def snippet_spans(match: p.SearchMatch) -> list[tuple[str, bool]]:
    """A search match's snippet on one line as (text, matched) runs, in order; highlights that
    overlap one before them or run past the end are left out."""
    text = " ".join(match.snippet.split("\n"))
    spans: list[tuple[str, bool]] = []
    at = 0
    for start, end in sorted(match.highlights):
        if start < at or end > len(text):
            continue
        spans.append((text[at:start], False))
        spans.append((text[start:end], True))
        at = end
    spans.append((text[at:], False))
    return spans


def delete_question(title_or_id: str) -> str:
    return f"Delete “{title_or_id}” and its whole transcript? This cannot be undone."


BUSY_DELETE = ("That session is working right now. Stop it first, or delete again to interrupt "
               "it and delete.")


@dataclass(frozen=True)
class BackendActions:
    """What a backend's part of the context menu offers: a new session there, the backends on
    its store, and removing its pairing (a remote one only)."""

    name: str
    key: str
    removable: bool


# --- the list ----------------------------------------------------------------------------


class SidebarRows(Generic[B]):
    """Every backend's sections and the rows they make now."""

    def __init__(self, sections: list[Section[B]]) -> None:
        self.sections = sections
        self.grouping = "day"
        self.matches: dict[str, p.SearchMatch] = {}
        self.entries: list[Entry] = []
        self._force_next: str | None = None  # a busy session asked to be deleted once already

    def rebuild(self, today: date | None = None) -> list[Entry]:
        """The rows anew: one backend's groups, or each backend's under a row naming it."""
        if len(self.sections) == 1:
            self.entries = grouped(0, self.sections[0].rows, self.grouping, today)
            return self.entries
        out: list[Entry] = []
        for n, section in enumerate(self.sections):
            out.append(BackendHeader(n))
            if section.rows.rows:
                out.extend(grouped(n, section.rows, self.grouping, today))
            else:
                out.append(empty_note(section))
        self.entries = out
        return out

    def position(self, entry: Entry) -> int | None:
        """The row showing `entry` (None when it is not shown)."""
        for row, e in enumerate(self.entries):
            if e == entry:
                return row
        return None

    def index_of_rows(self, rows: SessionRows) -> int | None:
        return next((n for n, s in enumerate(self.sections) if s.rows is rows), None)

    def index_of_link(self, link: B) -> int | None:
        return next((n for n, s in enumerate(self.sections) if s.link is link), None)

    def locate(self, session_id: str) -> tuple[int, int] | None:
        """(section, index into its rows) of a listed session."""
        for n, section in enumerate(self.sections):
            i = section.rows.index(session_id)
            if i is not None:
                return n, i
        return None

    def row_of(self, session_id: str) -> int | None:
        where = self.locate(session_id)
        return self.position(where) if where is not None else None

    def session_at(self, row: int) -> p.Session | None:
        if not 0 <= row < len(self.entries):
            return None
        entry = self.entries[row]
        if not isinstance(entry, tuple):
            return None
        n, i = entry
        return self.sections[n].rows.rows[i]

    def section_at(self, row: int) -> Section[B] | None:
        """The backend a row belongs to (its header, a group, a session)."""
        for entry in reversed(self.entries[:row + 1] if 0 <= row < len(self.entries) else []):
            if isinstance(entry, BackendHeader):
                return self.sections[entry.section]
            if isinstance(entry, tuple):
                return self.sections[entry[0]]
        return self.sections[0] if self.sections else None

    def section_of(self, link: B | None) -> Section[B]:
        """`link`'s section (the first's for a link it does not know)."""
        return next((s for s in self.sections if s.link is link), self.sections[0])

    def link_of(self, session_id: str) -> B | None:
        """The backend of a listed session (None when it is not listed)."""
        where = self.locate(session_id)
        return self.sections[where[0]].link if where is not None else None

    def listed_title(self, session_id: str) -> str:
        """A listed session's title, else its id (what a question about it names)."""
        where = self.locate(session_id)
        return title(self.sections[where[0]].rows.rows[where[1]]) if where is not None else session_id

    # --- what it lists -------------------------------------------------------------------

    def to_reload(self) -> list[Section[B]]:
        """The sections to list afresh: the first always, the others once connected (one not
        connected is listed when it connects)."""
        return [s for s in self.sections
                if s is self.sections[0] or s.link.current == "connected"]

    def listed(self, section: Section[B], matches: list[p.SearchMatch]) -> None:
        """A section was listed afresh: its search matches replace its old ones."""
        others = {sid: m for sid, m in self.matches.items()
                  if self.link_of(sid) not in (None, section.link)}
        self.matches = {**others, **{m.session_id: m for m in matches}}

    def waiting(self) -> list[Section[B]]:
        """The sections with more sessions to list (a next page)."""
        return [s for s in self.sections if s.rows.next_cursor]

    def empty_words(self) -> str | None:
        """What stands in place of the list (None: the list shows): only with one backend
        and no session to list, once listed (the empty list stands until the first listing)."""
        rows = self.sections[0].rows
        if rows.rows or not rows.listed or len(self.sections) != 1:
            return None
        query = self.sections[0].rows.query
        return f"Nothing matches “{query}”." if query else EMPTY

    @staticmethod
    def lists(event: Incoming) -> bool:
        """Whether an event changes the list: a session created or deleted, and a session's
        broadcast update (the one with no seq: not a followed session's own event)."""
        data = event.data
        return isinstance(data, (p.SessionCreated, p.SessionDeletedEvent)) \
            or (isinstance(data, p.SessionUpdated) and event.seq is None)

    def redraws(self, section: Section[B]) -> str:
        """What a change of a backend's connection redraws: "header" (its row says it),
        "all" (an empty section's note changes too), or "" (one backend: no header)."""
        if section not in self.sections or len(self.sections) < 2:
            return ""
        return "header" if section.rows.rows else "all"

    def backend_actions(self, row: int | None) -> BackendActions | None:
        """The backend part of the context menu at `row` (None for the empty space below the
        rows, or with one backend only)."""
        section = self.section_at(row) if row is not None else None
        if section is None or len(self.sections) < 2:
            return None
        return BackendActions(section.link.title, section.link.key, section is not self.sections[0])

    def backend_label(self, host: str) -> tuple[str, str, bool]:
        """"On HOST" above the sessions for a remote backend (its text, tooltip and whether it
        shows): nothing for this computer's, nor while several backends each have a header."""
        tip = f"These sessions live on the backend at {host}; their tools run there" if host else ""
        return (f"On {host}" if host else "", tip, bool(host) and len(self.sections) == 1)

    # --- deleting ------------------------------------------------------------------------

    def forcing(self, session_id: str, force: bool) -> bool:
        """Whether a delete of `session_id` interrupts it: asked for, or asked a second time
        after the backend said it was busy."""
        if self._force_next == session_id:
            self._force_next = None
            return True
        return force

    def busy(self, session_id: str) -> None:
        """The backend would not delete a working session: the next delete forces it."""
        self._force_next = session_id
