"""The session browser's list: summaries kept current by broadcast events.  Qt-free."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from shared import protocol as p
from shared.client import Incoming

STATUS_LABELS = {
    "idle": "Idle",
    "queued": "Queued",
    "running": "Working",
    "waiting_approval": "Needs approval",
    "waiting_answer": "Needs your answer",
    "unknown": "Outcome unknown",
}


@dataclass
class SessionRows:
    """Sessions most recent first; `query` set means search results (ranked by the backend)."""

    rows: list[p.Session] = field(default_factory=list)
    query: str = ""
    next_cursor: str | None = None
    listed: bool = False  # a listing has arrived (before it, an empty list says nothing)
    on_reset: Callable[[], None] = lambda: None
    on_row: Callable[[int], None] = lambda index: None
    # Events applied while a listing is on its way: its snapshot may predate them, so they are
    # applied again over it (a session created meanwhile vanished from the list otherwise).
    _since: list[Incoming] | None = None

    def loading(self) -> None:
        """A listing was asked for: keep the events from now on for `load`."""
        self._since = []

    def load(self, sessions: list[p.Session], next_cursor: str | None, query: str = "") -> None:
        self.rows = list(sessions)
        self.next_cursor = next_cursor
        self.query = query
        self.listed = True
        since, self._since = self._since or [], None
        for event in since:
            self._apply(event, newer_only=True)
        self.on_reset()

    def extend(self, sessions: list[p.Session], next_cursor: str | None) -> None:
        known = {r.session_id for r in self.rows}
        self.rows.extend(s for s in sessions if s.session_id not in known)
        self.next_cursor = next_cursor
        self.on_reset()

    def index(self, session_id: str) -> int | None:
        for i, row in enumerate(self.rows):
            if row.session_id == session_id:
                return i
        return None

    def apply(self, event: Incoming) -> None:
        if self._since is not None:
            self._since.append(event)
        self._apply(event)

    def _apply(self, event: Incoming, newer_only: bool = False) -> None:
        """`newer_only`: an update older than the row it would replace is left out (applied
        again over a listing that may already hold a later state)."""
        data = event.data
        if isinstance(data, p.SessionEvent) and data.session.delegated_from:
            return  # a sub-agent's session: reached from its parent's card, not listed
        if isinstance(data, p.SessionCreated) and not self.query:
            if self.index(data.session.session_id) is None:
                self.rows.insert(0, data.session)
                self.on_reset()
        elif isinstance(data, p.SessionUpdated):
            session = data.session
            i = self.index(session.session_id)
            if i is None:
                if not self.query:  # an older session, beyond the loaded page, came back to life
                    self.rows.insert(0, session)
                    self.rows.sort(key=lambda r: r.updated_at, reverse=True)
                    self.on_reset()
                return
            old = self.rows[i]
            if newer_only and session.updated_at < old.updated_at:
                return
            self.rows[i] = session
            if not self.query and session.updated_at != old.updated_at:
                self.rows.sort(key=lambda r: r.updated_at, reverse=True)
                self.on_reset()
            else:
                self.on_row(i)
        elif isinstance(data, p.SessionDeletedEvent):
            i = self.index(data.session_id)
            if i is not None:
                del self.rows[i]
                self.on_reset()


def status_label(status: str) -> str:
    return STATUS_LABELS.get(status, status.replace("_", " ").capitalize())


def ago(stamp: str | None, now: datetime | None = None) -> str:
    """'just now', '5 min ago', '3 h ago', or the date, for an ISO-8601 time."""
    if not stamp:
        return ""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    secs = ((now or datetime.now(UTC)) - when).total_seconds()
    if secs < 60:
        return "just now"
    if secs < 3600:
        return f"{int(secs // 60)} min ago"
    if secs < 86400:
        return f"{int(secs // 3600)} h ago"
    return when.astimezone().strftime("%Y-%m-%d")


def local_time(stamp: str, fmt: str = "%H:%M", unknown: str | None = None) -> str:
    """An RFC 3339 UTC time in local time, as `fmt` says; `unknown` (default: the stamp
    itself) for one that does not parse."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp if unknown is None else unknown
    return when.astimezone().strftime(fmt)


def cost(session: p.Session) -> str:
    value = session.usage.cost_usd
    return f"${value:.2f}" if value >= 0.01 or value == 0 else "<$0.01"


def home_relative(folder: str) -> str:
    """A folder as people read it: beneath the home folder as "~/…"."""
    home = str(Path.home())
    return "~" + folder[len(home):] if folder == home or folder.startswith(home + "/") else folder
