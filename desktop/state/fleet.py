"""The backends on a store in words: what `turnkey backends` prints and the app's Backends view
shows, from one `backend.list` answer (no Qt here)."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.state.sessions import local_time
from shared import protocol as p

# A state's word and its tone (the theme's text colours).
STATES: dict[str, tuple[str, str]] = {
    "live": ("live", "success"),
    "silent": ("silent", "warning"),
    "dead": ("dead", "danger"),
    "stopped": ("stopped", "muted"),
}
HEADERS = ("Host", "PID", "State", "Started", "Heartbeat", "Sessions held")
STARTED = "%Y-%m-%d %H:%M:%S"  # local time


@dataclass(frozen=True)
class Row:
    """One backend as a table row: each cell's text, the state's tone, and a tooltip."""

    this: bool
    host: str
    pid: str
    state: str
    tone: str
    started: str
    heartbeat: str
    sessions: str
    tip: str

    @property
    def cells(self) -> tuple[str, ...]:
        """The texts under HEADERS, in their order."""
        return (self.host, self.pid, self.state, self.started, self.heartbeat, self.sessions)


def age_words(seconds: float) -> str:
    """How long ago a heartbeat was: "now", "1.2 s ago", "14 s ago", "3 min ago", "5 h ago",
    "2 d ago"."""
    if seconds < 0.05:
        return "now"
    if seconds < 10:
        return f"{seconds:.1f} s ago"
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 86400:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} d ago"


def state_tip(b: p.BackendSummary, dead_after_s: float) -> str:
    """What a state means for that backend, in a sentence."""
    if b.state == "live":
        return "Beating its heartbeat; it takes prompts and runs turns."
    if b.state == "silent":
        return (f"No heartbeat for over {dead_after_s:g} s: the other backends count it as "
                "dead and take over its sessions.")
    if b.state == "dead":
        when = local_time(b.dead_at, STARTED) if b.dead_at else "?"
        return (f"Declared dead at {when} after its heartbeat stopped; its turns were taken "
                "over and whatever it still writes is refused.")
    return "Stopped cleanly."


def row(b: p.BackendSummary, dead_after_s: float) -> Row:
    word, tone = STATES.get(b.state, (b.state, "muted"))
    tip = state_tip(b, dead_after_s)
    if b.this:
        tip += " This is the backend that answered."
    return Row(this=b.this, host=b.host, pid=str(b.pid), state=word, tone=tone,
               started=local_time(b.started_at, STARTED), heartbeat=age_words(b.heartbeat_age_s),
               sessions=str(b.sessions_held), tip=tip)


def rows(result: p.BackendListResult) -> list[Row]:
    return [row(b, result.dead_after_s) for b in result.backends]


def summary(result: p.BackendListResult) -> str:
    """One line under the table: which store, and when a silent backend counts as dead."""
    if result.store == "sqlite":
        return ("SQLite store: this backend keeps its sessions in its own file, so it is the "
                "only one.")
    live = sum(1 for b in result.backends if b.state == "live")
    return (f"PostgreSQL store: {live} live of {len(result.backends)} listed. A backend "
            f"silent for {result.dead_after_s:g} s counts as dead and its sessions are taken over.")


def table(result: p.BackendListResult) -> str:
    """The listing as aligned text columns, the answering backend marked `*`, and the summary."""
    lines = [("", *(h.upper() for h in HEADERS))]
    lines += [("*" if r.this else "", *r.cells) for r in rows(result)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
           for line in lines]
    return "\n".join([*out, "", "* the backend that answered", summary(result)])
