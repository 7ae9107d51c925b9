"""desktop/state/fleet.py: a backend.list answer in words, as `turnkey backends` prints it and
the Backends view shows it."""

from __future__ import annotations

import pytest

from desktop.state.fleet import age_words, row, rows, summary, table
from desktop.state.sessions import local_time
from shared import protocol as p


def backend(pid: int, state: p.BackendState = "live", this: bool = False, age: float = 0.4,
            held: int = 0, dead_at: str | None = None) -> p.BackendSummary:
    return p.BackendSummary(epoch=pid, host=f"host-{pid}", pid=pid, started_at="2026-12-02T08:00:00.000Z",
                            heartbeat_at="2026-12-02T09:00:00.000Z", heartbeat_age_s=age,
                            state=state, dead_at=dead_at, sessions_held=held, this=this)


@pytest.mark.parametrize(("seconds", "words"), [
    (0.0, "now"), (0.04, "now"), (1.23, "1.2 s ago"), (9.94, "9.9 s ago"), (14.4, "14 s ago"),
    (59.4, "59 s ago"), (61, "1 min ago"), (3599, "59 min ago"), (3600, "1 h ago"),
    (50_000, "13 h ago"), (90_000, "1 d ago"), (8 * 86400, "8 d ago"),
])
def test_age_words(seconds: float, words: str) -> None:
    assert age_words(seconds) == words


def test_a_row_says_each_cell_and_why_in_its_tooltip() -> None:
    live = row(backend(41, this=True, held=2, age=0), 8)
    assert live.cells == ("host-41", "41", "live", local_time("2026-12-02T08:00:00.000Z",
                                                              "%Y-%m-%d %H:%M:%S"), "now", "2")
    assert (live.this, live.tone) == (True, "success")
    assert "answered" in live.tip
    silent = row(backend(42, "silent", age=12.5), 8)
    assert (silent.state, silent.tone, silent.heartbeat) == ("silent", "warning", "12 s ago")
    assert "over 8 s" in silent.tip
    assert "answered" not in silent.tip
    dead = row(backend(43, "dead", age=30, dead_at="2026-12-02T09:00:08.000Z"), 8)
    assert (dead.state, dead.tone) == ("dead", "danger")
    assert "Declared dead at" in dead.tip
    assert row(backend(44, "stopped"), 8).tone == "muted"


def test_the_table_aligns_columns_and_marks_the_backend_that_answered() -> None:
    result = p.BackendListResult(store="postgresql", dead_after_s=8, backends=[
        backend(7, this=True, held=1), backend(12345, "stopped", age=4000)])
    lines = table(result).splitlines()
    assert lines[0].split() == ["HOST", "PID", "STATE", "STARTED", "HEARTBEAT", "SESSIONS", "HELD"]
    assert lines[1].startswith("*  host-7 ")
    assert lines[2].startswith("   host-12345 ")
    assert lines[1].index("live") == lines[2].index("stopped") == lines[0].index("STATE")
    assert lines[2].split()[-3:] == ["h", "ago", "0"]
    assert lines[-2] == "* the backend that answered"
    assert lines[-1] == ("PostgreSQL store: 1 live of 2 listed. A backend silent for 8 s counts "
                         "as dead and its sessions are taken over.")
    assert [r.pid for r in rows(result)] == ["7", "12345"]


def test_on_sqlite_the_summary_says_it_is_the_only_one() -> None:
    result = p.BackendListResult(store="sqlite", dead_after_s=8, backends=[backend(7, this=True)])
    assert summary(result).startswith("SQLite store: this backend keeps its sessions in its own file")
