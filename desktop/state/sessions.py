"""The session browser's list: summaries kept current by broadcast events.  Qt-free."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

STATUS_LABELS = {
    "idle": "Idle",
    "queued": "Queued",
    "running": "Working",
    "waiting_approval": "Needs approval",
    "unknown": "Interrupted by a crash",
}


@dataclass
class SessionList:
    """Sessions most recent first; `query` set means search results (ranked by the backend)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    query: str = ""
    next_cursor: str | None = None
    on_reset: Callable[[], None] = lambda: None
    on_row: Callable[[int], None] = lambda index: None

    def load(self, sessions: list[dict[str, Any]], next_cursor: str | None, query: str = "") -> None:
        self.rows = list(sessions)
        self.next_cursor = next_cursor
        self.query = query
        self.on_reset()

    def extend(self, sessions: list[dict[str, Any]], next_cursor: str | None) -> None:
        known = {r["session_id"] for r in self.rows}
        self.rows.extend(s for s in sessions if s["session_id"] not in known)
        self.next_cursor = next_cursor
        self.on_reset()

    def index(self, session_id: str) -> int | None:
        for i, row in enumerate(self.rows):
            if row["session_id"] == session_id:
                return i
        return None

    def apply(self, event: dict[str, Any]) -> None:
        kind, data = event.get("type"), event.get("data") or {}
        if kind == "session.created" and not self.query:
            session = data["session"]
            if self.index(session["session_id"]) is None:
                self.rows.insert(0, session)
                self.on_reset()
        elif kind == "session.updated":
            session = data["session"]
            i = self.index(session["session_id"])
            if i is None:
                if not self.query:  # an older session, beyond the loaded page, came back to life
                    self.rows.insert(0, session)
                    self.rows.sort(key=lambda r: r.get("updated_at") or "", reverse=True)
                    self.on_reset()
                return
            old = self.rows[i]
            self.rows[i] = {**old, **session}
            if not self.query and session.get("updated_at") != old.get("updated_at"):
                self.rows.sort(key=lambda r: r.get("updated_at") or "", reverse=True)
                self.on_reset()
            else:
                self.on_row(i)
        elif kind == "session.deleted":
            i = self.index(data.get("session_id") or event.get("session_id", ""))
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


def cost(session: dict[str, Any]) -> str:
    usage = session.get("usage") or {}
    value = float(usage.get("cost_usd") or 0)
    return f"${value:.2f}" if value >= 0.01 or value == 0 else "<$0.01"
